//! Idempotent creates (`Idempotency-Key`, draft-ietf-httpapi-idempotency-key-header): the
//! key, the request's fingerprint, the answer kept with the book, and its replays.
//!
//! A keyed create first looks for the key's record: same fingerprint, the kept answer
//! again (`Idempotent-Replayed: true`); another fingerprint, 422. Otherwise the store
//! writes the book and the record in one transaction ([`BookStore::create_keyed`]), so
//! a client that retries until it gets an answer ends with exactly one book, whatever
//! crashed in between. While a request with the key is being answered in this process,
//! another gets 409; in another process, the store's unique key makes the second wait
//! for the first's transaction and then replay its answer.
//!
//! [`BookStore::create_keyed`]: crate::BookStore::create_keyed

use std::collections::HashSet;
use std::sync::Mutex;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, ETAG, HeaderName, HeaderValue, LOCATION, VARY};
use http::{HeaderMap, Response, StatusCode};
use sha2::{Digest, Sha256};

use crate::store::StoredAnswer;

/// `Idempotency-Key`.
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// `Idempotent-Replayed`, on a replayed answer.
pub(crate) const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The request's key: `Ok(None)` without the header; `Err(())` when it is not one
/// structured-field string (`"…"`, `\"` and `\\` escaped) or bare token of 1 to 255
/// visible ASCII characters, or is sent twice.
pub(crate) fn key(request: &HeaderMap) -> Result<Option<String>, ()> {
    let mut values = request.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(());
    }
    let bytes = value.as_bytes().trim_ascii();
    let key = match bytes {
        [b'"', inner @ .., b'"'] => {
            let mut key = Vec::with_capacity(inner.len());
            let mut escaped = false;
            for &byte in inner {
                match (escaped, byte) {
                    (false, b'\\') => escaped = true,
                    (false, b'"') => return Err(()),
                    (true, b'"' | b'\\') => {
                        key.push(byte);
                        escaped = false;
                    }
                    (true, _) => return Err(()),
                    (false, b' '..=b'~') => key.push(byte),
                    (false, _) => return Err(()),
                }
            }
            if escaped {
                return Err(());
            }
            key
        }
        [b'"', ..] => return Err(()),
        bare if bare.iter().all(|b| b.is_ascii_graphic()) => bare.to_vec(),
        _ => return Err(()),
    };
    if key.is_empty() || key.len() > 255 {
        return Err(());
    }
    String::from_utf8(key).map(Some).map_err(|_| ())
}

/// SHA-256 of what makes a create the same request: its route, its `Content-Type` and
/// its body's bytes.
pub(crate) fn fingerprint(route: &str, content_type: Option<&HeaderValue>, body: &[u8]) -> Vec<u8> {
    let mut hasher = Sha256::new();
    for part in [
        route.as_bytes(),
        content_type.map_or(&b""[..], HeaderValue::as_bytes),
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.update(body);
    hasher.finalize().to_vec()
}

/// A created book's answer, as it is kept: its status, the headers a replay repeats, and
/// the body.
pub(crate) fn keep(answer: &Response<Bytes>) -> StoredAnswer {
    let header = |name| {
        answer
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    StoredAnswer {
        status: answer.status().as_u16(),
        content_type: header(CONTENT_TYPE),
        location: header(LOCATION),
        etag: header(ETAG),
        body: answer.body().to_vec(),
    }
}

/// The response for a kept answer, its body and fields as first sent (`replayed` adds
/// `Idempotent-Replayed: true`; `Date` and `X-Request-Id` are the replay's own). Whatever a host wrote into the record, the answer stays
/// well-formed HTTP: a value that is not a valid header is left out.
pub(crate) fn answer(kept: &StoredAnswer, replayed: bool) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(kept.body.clone()));
    *response.status_mut() = StatusCode::from_u16(kept.status).unwrap_or(StatusCode::CREATED);
    let headers = response.headers_mut();
    for (name, value) in [
        (CONTENT_TYPE, &kept.content_type),
        (LOCATION, &kept.location),
        (ETAG, &kept.etag),
    ] {
        if let Ok(value) = HeaderValue::try_from(value.as_str()) {
            headers.insert(name, value);
        }
    }
    headers.insert(VARY, HeaderValue::from_static("Accept"));
    if replayed {
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// The keys this process is answering a create for.
#[derive(Debug, Default)]
pub(crate) struct InFlight(Mutex<HashSet<String>>);

/// A key held while its request is answered; released when dropped.
pub(crate) struct Held<'a> {
    flight: &'a InFlight,
    key: String,
}

impl InFlight {
    /// Holds `key`, or `None` when another request holds it.
    pub(crate) fn hold(&self, key: &str) -> Option<Held<'_>> {
        let mut keys = self.0.lock().unwrap_or_else(|e| e.into_inner());
        keys.insert(key.to_owned()).then(|| Held {
            flight: self,
            key: key.to_owned(),
        })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut keys = self.flight.0.lock().unwrap_or_else(|e| e.into_inner());
        keys.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(values: &[&[u8]]) -> Result<Option<String>, ()> {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(IDEMPOTENCY_KEY, HeaderValue::from_bytes(value).unwrap());
        }
        key(&headers)
    }

    #[test]
    fn keys_are_strings_or_tokens_of_visible_ascii() {
        assert_eq!(parse(&[]), Ok(None));
        assert_eq!(parse(&[b"abc-123"]), Ok(Some("abc-123".into())));
        assert_eq!(
            parse(&[b"\"a b\""]),
            Ok(Some("a b".into())),
            "a string keeps spaces"
        );
        assert_eq!(
            parse(&[b"\"a\\\"b\\\\\""]),
            Ok(Some("a\"b\\".into())),
            "escapes"
        );
        assert_eq!(parse(&[b" key "]), Ok(Some("key".into())), "outer spaces");
        let longest = "k".repeat(255);
        assert_eq!(parse(&[longest.as_bytes()]), Ok(Some(longest.clone())));
        for bad in [
            &b""[..],
            b"\"\"",
            b"a b",
            b"\"unterminated",
            b"\"a\"b\"",
            b"\"bad \\n escape\"",
            b"\"trailing\\\"",
            "\u{e9}t\u{e9}".as_bytes(),
            b"tab\there",
        ] {
            assert_eq!(parse(&[bad]), Err(()), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse(&["k".repeat(256).as_bytes()]), Err(()), "too long");
        assert_eq!(parse(&[b"a", b"b"]), Err(()), "sent twice");
    }

    #[test]
    fn fingerprints_tell_route_type_and_body_apart() {
        let json = HeaderValue::from_static("application/json");
        let a = fingerprint("/books", Some(&json), b"{}");
        assert_eq!(a, fingerprint("/books", Some(&json), b"{}"));
        assert_ne!(a, fingerprint("/books/create", Some(&json), b"{}"));
        assert_ne!(a, fingerprint("/books", None, b"{}"));
        assert_ne!(a, fingerprint("/books", Some(&json), b"{ }"));
        assert_ne!(
            fingerprint("/booksa", None, b"b"),
            fingerprint("/books", None, b"ab"),
            "the parts are delimited"
        );
    }

    #[test]
    fn a_key_is_held_by_one_request_at_a_time() {
        let flight = InFlight::default();
        let held = flight.hold("k").expect("free");
        assert!(flight.hold("k").is_none());
        assert!(flight.hold("other").is_some());
        drop(held);
        assert!(flight.hold("k").is_some(), "released");
    }
}
