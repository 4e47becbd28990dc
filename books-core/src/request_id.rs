//! Request ids: the client's `X-Request-Id` when it is a usable one, a new id otherwise.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};

/// The header a request id arrives in and is answered with.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// One request's id: sent back in `X-Request-Id`, carried by the request's log lines, and
/// shown in problem bodies as `instance` (`urn:request:<id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The longest id taken from a client.
    pub const MAX_LEN: usize = 64;

    /// The id in the request's `X-Request-Id` if it is usable (1 to [`MAX_LEN`](Self::MAX_LEN)
    /// of `A-Z a-z 0-9 - . _ ~ : + / = @`, so it stays a valid URN, header and log field),
    /// otherwise a [new](Self::generate) one.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        headers
            .get(REQUEST_ID)
            .filter(|value| usable(value.as_bytes()))
            .map_or_else(Self::generate, |value| Self(value.clone()))
    }

    /// A new id: 16 hex digits, unique within this process and unpredictable across
    /// processes (a counter hashed with keys drawn at start; no system call per id).
    pub fn generate() -> Self {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let id = KEYS.get_or_init(RandomState::new).hash_one(n);
        // By hand: `format!` costs more than the rest of a cached answer's id handling.
        let mut hex = [0u8; 16];
        for (i, digit) in hex.iter_mut().enumerate() {
            *digit = b"0123456789abcdef"[(id >> (60 - 4 * i) & 0xf) as usize];
        }
        Self(HeaderValue::from_bytes(&hex).expect("hex digits are header-safe"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII ever gets in (checked or generated).
        self.0.to_str().unwrap_or_default()
    }

    /// The id as a header value.
    pub fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn usable(id: &[u8]) -> bool {
    (1..=RequestId::MAX_LEN).contains(&id.len())
        && id.iter().all(|&b| {
            matches!(b, b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9'
                | b'-' | b'.' | b'_' | b'~' | b':' | b'+' | b'/' | b'=' | b'@')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(value: &str) -> RequestId {
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_ID, HeaderValue::from_str(value).unwrap());
        RequestId::from_headers(&headers)
    }

    #[test]
    fn usable_ids_are_kept() {
        for id in [
            "a",
            "3f2a-9c",
            "req:1/2=x@y",
            "A-._~:+/=@z9",
            &"x".repeat(64),
        ] {
            assert_eq!(given(id).as_str(), id);
        }
    }

    #[test]
    fn unusable_ids_are_replaced() {
        for id in [
            "",
            "has space",
            "<tag>",
            "quote\"",
            "a!b",
            "a,b",
            "é",
            &"x".repeat(65),
        ] {
            let replaced = given(id);
            assert_ne!(replaced.as_str(), id);
            assert_eq!(replaced.as_str().len(), 16, "{id:?}");
        }
        assert_eq!(
            RequestId::from_headers(&HeaderMap::new()).as_str().len(),
            16
        );
    }

    #[test]
    fn generated_ids_differ() {
        let ids: std::collections::HashSet<_> = (0..1000)
            .map(|_| RequestId::generate().to_string())
            .collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert!(
                id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
        }
        // Every digit position takes every value: no nibble is lost or repeated.
        for position in 0..16 {
            let digits: std::collections::HashSet<_> =
                ids.iter().map(|id| id.as_bytes()[position]).collect();
            assert_eq!(digits.len(), 16, "position {position}");
        }
    }
}
