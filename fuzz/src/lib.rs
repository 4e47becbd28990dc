//! What the fuzz targets share: reading an input as a request, a runtime, and the
//! invariants every answer keeps.

use std::sync::OnceLock;

use books_core::testing::XmlNode;
use books_core::store::AuthorStore;
use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use bytes::Bytes;
use http::{Method, Request, Response};

/// One runtime for the whole fuzzing process.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// An API over a memory store holding the demo data (authors 1..=50, books 1..=45).
pub fn demo_api(config: Config) -> BooksApi {
    let store = MemStore::new();
    runtime().block_on(async {
        books_core::demo::load_if_empty(&store, chrono::Utc::now())
            .await
            .expect("demo data");
        store.add_author(None).await.expect("an author without a name");
    });
    BooksApi::new(store, config)
}

/// Reads `data` as `METHOD TARGET`, header lines `name: value`, an empty line, then the
/// body (LF or CRLF line ends): the same text the seed corpus and dictionary speak.
/// `None` when `http` cannot hold it (no server would hand such a request on).
pub fn request(data: &[u8]) -> Option<Request<Bytes>> {
    let (head, body) = match find(data, b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.lines();
    let (method, target) = lines.next()?.trim_end_matches('\r').split_once(' ')?;
    let mut builder = Request::builder().method(method).uri(target);
    for line in lines {
        let (name, value) = line.trim_end_matches('\r').split_once(':')?;
        builder = builder.header(name.trim(), value.trim());
    }
    builder.body(Bytes::copy_from_slice(body)).ok()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The invariants of every answer: no 5xx (a memory store never fails), `HEAD` without
/// a body, JSON and XML bodies that parse (decoded first when compressed), `Location` on
/// a 201, `Vary: Accept` on every answer that has a representation (with
/// `Accept-Encoding` where it may be compressed).
pub fn check(method: &Method, response: &Response<Bytes>) {
    let status = response.status();
    assert!(!status.is_server_error(), "{status}: {response:?}");
    let body = response.body();
    if method == Method::HEAD {
        assert!(body.is_empty(), "HEAD with a body: {response:?}");
    }
    if status == 201 {
        assert!(response.headers().contains_key("location"), "{response:?}");
    }
    if status != 204 {
        let vary = &response.headers()["vary"];
        assert!(vary == "Accept" || vary == "Accept, Accept-Encoding", "{response:?}");
    }
    assert!(response.headers().contains_key("x-request-id"), "{response:?}");
    if status == 304 {
        assert!(body.is_empty() && response.headers().contains_key("etag"), "{response:?}");
    }
    if body.is_empty() {
        return;
    }
    let decoded = decode(response);
    let body = &decoded[..];
    let content_type = response.headers()["content-type"].to_str().expect("ASCII");
    if content_type.contains("json") {
        serde_json::from_slice::<serde_json::Value>(body).expect("well-formed JSON");
    } else if content_type.contains("xml") {
        XmlNode::parse(body);
    } else {
        panic!("unexpected content type {content_type}");
    }
}

/// The body as sent before its `Content-Encoding`, which must decode.
fn decode(response: &Response<Bytes>) -> Vec<u8> {
    match response.headers().get("content-encoding") {
        Some(coding) => books_core::testing::decoded(coding.to_str().expect("ASCII"), response.body()),
        None => response.body().to_vec(),
    }
}
