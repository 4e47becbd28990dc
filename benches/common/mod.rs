//! Floors shared by the benches: handwritten functions that build the same
//! `http::Response` as the API from prepared values, with serde_json.

#![allow(dead_code)]

use books_core::store::BookRecord;
use bytes::Bytes;
use chrono::{DateTime, Datelike, Timelike, Utc};
use http::header::{
    CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, DATE, HeaderValue, LOCATION, VARY,
};
use http::{Response, StatusCode};
use serde::Serialize;

pub const BASE: &str = "http://localhost:8080";

/// The request id every bench request sends (the API echoes it; generating one instead
/// costs a hash and a 16-digit format).
pub const REQUEST_ID: &str = "bench-1";

/// `Date` at the benches' clock (2026-06-15 12:00:00 UTC), prepared as the other values
/// are (the API formats it once per second).
pub const DATE_VALUE: &str = "Mon, 15 Jun 2026 12:00:00 GMT";

/// Asserts two responses are byte-identical (status, headers, body).
pub fn same(ours: &Response<Bytes>, floor: &Response<Bytes>) {
    assert_eq!(ours.status(), floor.status());
    assert_eq!(ours.headers(), floor.headers());
    assert_eq!(
        ours.body(),
        floor.body(),
        "{}",
        String::from_utf8_lossy(ours.body())
    );
}

pub fn respond(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Bytes> {
    let length = body.len();
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(VARY, HeaderValue::from_static("Accept"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-request-id", HeaderValue::from_static(REQUEST_ID));
    headers.insert(DATE, HeaderValue::from_static(DATE_VALUE));
    response
}

/// A book or page as a GET answers it: tagged, and `Vary` naming `Accept-Encoding` too
/// (its compressed variants).
pub fn read(response: Response<Bytes>) -> Response<Bytes> {
    let mut response = tagged(response);
    let vary = HeaderValue::from_static("Accept, Accept-Encoding");
    response.headers_mut().insert(VARY, vary);
    response
}

/// `response` with the API's strong `ETag` (XXH3 of the media type, a zero byte and the
/// body) and a book's or page's `Cache-Control: no-cache`.
pub fn tagged(mut response: Response<Bytes>) -> Response<Bytes> {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(response.headers()[CONTENT_TYPE].as_bytes());
    hasher.update(&[0]);
    hasher.update(response.body());
    let tag = format!("\"{:016x}\"", hasher.digest());
    let headers = response.headers_mut();
    headers.insert(http::header::ETAG, HeaderValue::try_from(tag).unwrap());
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[derive(Serialize)]
pub struct Ping {
    status: &'static str,
}

pub fn floor_ping() -> Response<Bytes> {
    respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(&Ping { status: "ok" }).unwrap(),
    )
}

/// `YYYY-MM-DD HH:MM:SS`, digits written by hand (the cheapest handwritten way).
pub struct Stamp(DateTime<Utc>);

impl Serialize for Stamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut out = *b"0000-00-00 00:00:00";
        for (at, digits, value) in [
            (0, 4, t.year() as u32),
            (5, 2, t.month()),
            (8, 2, t.day()),
            (11, 2, t.hour()),
            (14, 2, t.minute()),
            (17, 2, t.second()),
        ] {
            let mut value = value;
            for i in (at..at + digits).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        }
        serializer.serialize_str(std::str::from_utf8(&out).unwrap())
    }
}

#[derive(Serialize)]
pub struct Author<'a> {
    id: i64,
    name: &'a str,
}

#[derive(Serialize)]
pub struct Book<'a> {
    id: i64,
    title: &'a str,
    year: i32,
    created_at: Stamp,
    updated_at: Stamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<Option<Author<'a>>>,
}

pub fn book(record: &BookRecord, include: bool) -> Book<'_> {
    let stamp = Stamp;
    Book {
        id: record.id,
        title: &record.title,
        year: record.year,
        created_at: stamp(record.created_at),
        updated_at: stamp(record.updated_at),
        author: include.then(|| match (record.author_id, &record.author_name) {
            (Some(id), Some(name)) => Some(Author { id, name }),
            _ => None,
        }),
    }
}

pub fn floor_book(record: &BookRecord) -> Response<Bytes> {
    read(respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(&book(record, false)).unwrap(),
    ))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    page: u64,
    per_page: u32,
    total: u64,
    total_pages: u64,
}

#[derive(Serialize)]
pub struct Links {
    #[serde(rename = "self")]
    self_: String,
    first: String,
    last: String,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Serialize)]
pub struct Page<'a> {
    data: Vec<Book<'a>>,
    meta: Meta,
    links: Links,
}

pub fn floor_list(records: &[BookRecord], include: bool, total: u64) -> Response<Bytes> {
    let suffix = if include { "&include=author" } else { "" };
    let link = |n: u64| format!("{BASE}/api/books?page={n}{suffix}");
    let page = Page {
        data: records.iter().map(|r| book(r, include)).collect(),
        meta: Meta {
            page: 1,
            per_page: 20,
            total,
            total_pages: total.div_ceil(20).max(1),
        },
        links: Links {
            self_: link(1),
            first: link(1),
            last: link(total.div_ceil(20).max(1)),
            prev: None,
            next: (total > 20).then(|| link(2)),
        },
    };
    read(respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(&page).unwrap(),
    ))
}

pub fn floor_created(record: &BookRecord) -> Response<Bytes> {
    let mut response = tagged(respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(&book(record, false)).unwrap(),
    ));
    *response.status_mut() = StatusCode::CREATED;
    let location = format!("{BASE}/api/books/{}", record.id);
    response
        .headers_mut()
        .insert(LOCATION, HeaderValue::try_from(location).unwrap());
    response
}

#[derive(Serialize)]
pub struct Errors {
    title: [&'static str; 1],
    year: [&'static str; 1],
}

#[derive(Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: &'static str,
    instance: String,
    errors: Errors,
}

pub fn floor_invalid() -> Response<Bytes> {
    let problem = Problem {
        kind: "about:blank",
        title: "Unprocessable Content",
        status: 422,
        detail: "The given data was invalid.",
        instance: format!("urn:request:{REQUEST_ID}"),
        errors: Errors {
            title: ["The title field is required."],
            year: ["The year must be at least 2000."],
        },
    };
    respond(
        StatusCode::UNPROCESSABLE_ENTITY,
        "application/problem+json",
        serde_json::to_vec(&problem).unwrap(),
    )
}
