//! The answers the server makes itself, beside the API's: their type, and its plain
//! text and problem bodies. None may be stored by a cache (`Cache-Control: no-store`).

use books_core::RequestId;
use bytes::Bytes;
use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http_body_util::Full;

/// What the connection loop answers with.
pub(crate) type Response = http::Response<Full<Bytes>>;

/// `Cache-Control` of every answer the server makes itself.
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

/// A plain-text answer (the operator endpoints).
pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut response = Response::new(Full::new(Bytes::from(body.into())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, NO_STORE);
    response
}

/// A problem the connection loop answers itself, before the API (JSON: there is no
/// negotiation this early), counted as refused for `reason`.
pub(crate) fn problem(
    status: StatusCode,
    detail: &'static str,
    reason: &'static str,
    id: &RequestId,
) -> Response {
    books_core::refusal(status, detail, reason, id).map(Full::new)
}

/// An empty answer (a CORS preflight's 204).
pub(crate) fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response.headers_mut().insert(CACHE_CONTROL, NO_STORE);
    response
}
