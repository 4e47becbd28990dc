//! The body decoders (form, JSON, multipart) on any content type and body: no panic, and
//! a refusal is a 4xx.
#![no_main]

use books_fuzz::runtime;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

// First line: the `Content-Type` (empty: none); the rest: the body.
fuzz_target!(|data: &[u8]| {
    let (content_type, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let mut headers = HeaderMap::new();
    if !content_type.is_empty() {
        let Ok(value) = HeaderValue::from_bytes(content_type) else {
            return;
        };
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    let decoded = runtime().block_on(books_core::fuzzing::decode_body(
        &headers,
        Bytes::copy_from_slice(body),
    ));
    if let Err(status) = decoded {
        assert!((400..500).contains(&status), "{status}");
    }
});
