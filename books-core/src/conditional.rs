//! Conditional reads (RFC 9110 §13.1.2, §15.4.5): a 200 whose `ETag` the request's
//! `If-None-Match` names becomes a 304 Not Modified.

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use http::{HeaderMap, Response, StatusCode};

use crate::etag::none_match_names;
use crate::fields;

/// Turns a 200 that carries an `ETag` into a 304 when the request's `If-None-Match`
/// names that tag (weak comparison) or is `*`. The 304 keeps the headers a 200 would
/// send (`ETag`, `Vary` …) but no body and no body metadata.
pub(crate) fn not_modified_if_matching(request: &HeaderMap, response: &mut Response<Bytes>) {
    let named = response.status() == StatusCode::OK
        && fields::has(request, &IF_NONE_MATCH)
        && response
            .headers()
            .get(ETAG)
            .is_some_and(|tag| none_match_names(request, tag.as_bytes()));
    if named {
        make_not_modified(response);
    }
}

/// The 304 that stands for `answer` (a 200): its headers but no body and no body metadata.
pub(crate) fn make_not_modified(answer: &mut Response<Bytes>) {
    *answer.status_mut() = StatusCode::NOT_MODIFIED;
    *answer.body_mut() = Bytes::new();
    let headers = answer.headers_mut();
    headers.remove(CONTENT_TYPE);
    headers.remove(CONTENT_LENGTH);
    headers.remove(CONTENT_ENCODING);
}
