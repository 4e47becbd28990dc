//! Response bodies (JSON or XML) and headers.

use std::borrow::Cow;

use bytes::Bytes;
use chrono::{DateTime, Datelike, Timelike, Utc};
use http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HeaderValue, VARY};
use http::{Response, StatusCode};
use serde::{Serialize, Serializer};

use crate::etag;
use crate::negotiate::Format;
use crate::pagination::{Links, Meta};
use crate::problem::{Problem, ProblemBody};
use crate::query::Includes;
use crate::request_id::RequestId;
use crate::store::BookRecord;
use crate::xml::{to_xml, xml_safe};

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const XML: HeaderValue = HeaderValue::from_static("application/xml; charset=utf-8");
const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const PROBLEM_XML: HeaderValue = HeaderValue::from_static("application/problem+xml; charset=utf-8");
const ACCEPT: HeaderValue = HeaderValue::from_static("Accept");

/// `Cache-Control` of every answer but books and pages: ping, problems, deletes,
/// `OPTIONS`. No cache may store them (a ping's time, a problem's request id).
pub(crate) const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

/// A timestamp as `YYYY-MM-DD HH:MM:SS` (UTC).
struct Timestamp(DateTime<Utc>);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // chrono's `format` interprets its pattern on every call; written by hand this is
        // ~20x cheaper, which matters at 40 timestamps a page.
        let t = self.0;
        let year = t.year();
        if !(0..=9999).contains(&year) {
            return serializer.collect_str(&t.format("%Y-%m-%d %H:%M:%S"));
        }
        let mut out = *b"0000-00-00 00:00:00";
        let mut put = |at: usize, digits: usize, mut value: u32| {
            for i in (at..at + digits).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year as u32);
        put(5, 2, t.month());
        put(8, 2, t.day());
        put(11, 2, t.hour());
        put(14, 2, t.minute());
        put(17, 2, t.second());
        serializer.serialize_str(std::str::from_utf8(&out).expect("ASCII digits"))
    }
}

#[derive(Serialize)]
struct AuthorView<'a> {
    id: i64,
    name: Cow<'a, str>,
}

/// A book as the API shows it; stored text XML cannot carry shows as U+FFFD.
#[derive(Serialize)]
pub(crate) struct BookView<'a> {
    id: i64,
    title: Cow<'a, str>,
    year: i32,
    created_at: Timestamp,
    updated_at: Timestamp,
    /// Absent unless included; `null` without an author id or name.
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<Option<AuthorView<'a>>>,
}

impl<'a> BookView<'a> {
    pub(crate) fn new(book: &'a BookRecord, includes: Includes) -> Self {
        Self {
            id: book.id,
            title: xml_safe(&book.title),
            year: book.year,
            created_at: Timestamp(book.created_at),
            updated_at: Timestamp(book.updated_at),
            author: includes
                .author
                .then(|| match (book.author_id, &book.author_name) {
                    (Some(id), Some(name)) => Some(AuthorView {
                        id,
                        name: xml_safe(name),
                    }),
                    _ => None,
                }),
        }
    }
}

/// The page envelope.
#[derive(Serialize)]
pub(crate) struct PageView<'a> {
    pub(crate) data: Vec<BookView<'a>>,
    pub(crate) meta: Meta,
    pub(crate) links: Links,
}

/// The ping answer.
#[derive(Serialize)]
pub(crate) struct Ping {
    pub(crate) status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<&'static str>,
}

/// The delete answer.
#[derive(Serialize)]
pub(crate) struct Deleted {
    pub(crate) id: i64,
}

/// A success response, `Cache-Control: no-store` (see [`representation`] for books and
/// pages); `root` names the XML root element.
pub(crate) fn success<T: Serialize>(
    status: StatusCode,
    format: Format,
    root: &str,
    value: &T,
) -> Response<Bytes> {
    let (body, content_type) = match format {
        Format::Json => (serialize_json(value), JSON),
        Format::Xml => (serialize_xml(root, value), XML),
    };
    response(status, content_type, body)
}

/// One book's answer (`200`), tagged, with `Cache-Control: cache_control`.
pub(crate) fn book(
    book: &BookRecord,
    includes: Includes,
    format: Format,
    cache_control: &HeaderValue,
) -> Response<Bytes> {
    let view = BookView::new(book, includes);
    let answer = success(StatusCode::OK, format, "book", &view);
    representation(answer, cache_control)
}

/// A book or page answer: its strong `ETag`, and `Cache-Control: cache_control` (what
/// the API's configuration tells other caches about books and pages).
pub(crate) fn representation(
    mut response: Response<Bytes>,
    cache_control: &HeaderValue,
) -> Response<Bytes> {
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(HeaderValue::as_bytes);
    let tag = etag::for_body(content_type.unwrap_or_default(), response.body());
    let headers = response.headers_mut();
    headers.insert(ETAG, tag);
    headers.insert(CACHE_CONTROL, cache_control.clone());
    response
}

/// A problem-details response with the problem's own headers; `request_id` becomes the
/// problem's `instance`.
pub(crate) fn problem(
    problem: &Problem,
    format: Format,
    request_id: &RequestId,
) -> Response<Bytes> {
    let body = ProblemBody::new(problem, request_id);
    let (bytes, content_type) = match format {
        Format::Json => (serialize_json(&body), PROBLEM_JSON),
        Format::Xml => (serialize_xml("problem", &body), PROBLEM_XML),
    };
    let mut response = response(problem.status, content_type, bytes);
    let headers = response.headers_mut();
    for (name, value) in &problem.headers {
        headers.insert(name, value.clone());
    }
    response
}

/// The OpenAPI document: JSON whatever the `Accept` (there is no other form of it); any
/// cache may keep it but asks again before each use (`no-cache`: a host may change its
/// configuration, and the server URL in it, at any restart).
pub(crate) fn document(body: Bytes) -> Response<Bytes> {
    let mut answer = response(StatusCode::OK, JSON, body);
    answer
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    answer
}

fn response(
    status: StatusCode,
    content_type: HeaderValue,
    body: impl Into<Bytes>,
) -> Response<Bytes> {
    let body = body.into();
    let length = HeaderValue::from(body.len());
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, content_type);
    headers.insert(VARY, ACCEPT);
    headers.insert(CONTENT_LENGTH, length);
    headers.insert(CACHE_CONTROL, NO_STORE);
    response
}

fn serialize_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("API values serialise to JSON")
}

fn serialize_xml<T: Serialize>(root: &str, value: &T) -> Vec<u8> {
    to_xml(
        root,
        &serde_json::to_value(value).expect("API values serialise to JSON"),
    )
}

/// A problem answer (RFC 9457, JSON) to a request a host refuses before the API sees it —
/// a server shedding load, a rate limit, a malformed request — made as the API makes its
/// own: `Cache-Control: no-store`, the request's id in `X-Request-Id` and in the
/// problem's `instance`. Counted in [`REJECTIONS`](crate::metrics::REJECTIONS) under
/// `reason`.
pub fn refusal(
    status: StatusCode,
    detail: &'static str,
    reason: &'static str,
    id: &RequestId,
) -> http::Response<bytes::Bytes> {
    crate::metrics::rejected(reason);
    let problem = Problem::new(status, detail);
    let mut response = crate::render::problem(&problem, crate::negotiate::Format::Json, id);
    let headers = response.headers_mut();
    headers.insert(http::header::CACHE_CONTROL, crate::render::NO_STORE);
    headers.insert(crate::request_id::REQUEST_ID, id.header_value().clone());
    response
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn timestamps_match_chrono_format() {
        for t in [
            Utc.with_ymd_and_hms(2026, 11, 22, 10, 4, 5).unwrap(),
            Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(12345, 6, 7, 8, 9, 10).unwrap(),
        ] {
            let ours = serde_json::to_string(&Timestamp(t)).unwrap();
            assert_eq!(ours, format!("\"{}\"", t.format("%Y-%m-%d %H:%M:%S")));
        }
    }
}
