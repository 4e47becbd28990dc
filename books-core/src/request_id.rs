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
///
/// Its header value is marked sensitive, which HTTP/2's header compression reads as
/// "never index": a value unique to each answer would only evict the connection's
/// repeated fields from the table, and be searched for among its predecessors on every
/// answer (a ping over HTTP/2 answered at 0.78x bare hyper's rate with it indexed, 0.84x
/// without: `scripts/load.py --http2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The longest id taken from a client.
    pub const MAX_LEN: usize = 64;

    /// The id in the request's `X-Request-Id` if it is usable (1 to [`MAX_LEN`](Self::MAX_LEN)
    /// of `A-Z a-z 0-9 - . _ ~ : + / = @`, so it stays a valid URN, header and log field),
    /// otherwise a [new](Self::generate) one.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        // A walk over the request's few fields: hashing a name that is not a standard
        // one costs more than comparing it with each of them.
        headers
            .iter()
            .find_map(|(name, value)| (*name == REQUEST_ID).then_some(value))
            .filter(|value| usable(value.as_bytes()))
            .map_or_else(Self::generate, |value| Self::unindexed(value.clone()))
    }

    /// A new id: 16 hex digits, unique within this process and unpredictable across
    /// processes (a counter through a permutation keyed at start; no system call per id).
    pub fn generate() -> Self {
        static KEYS: OnceLock<[u64; 4]> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let keys = KEYS.get_or_init(|| {
            let random = RandomState::new();
            std::array::from_fn(|i| random.hash_one(i))
        });
        let id = permute(n, keys);
        // By hand: `format!` costs more than the rest of a cached answer's id handling.
        let mut hex = [0u8; 16];
        for (i, digit) in hex.iter_mut().enumerate() {
            *digit = b"0123456789abcdef"[(id >> (60 - 4 * i) & 0xf) as usize];
        }
        Self::unindexed(HeaderValue::from_bytes(&hex).expect("hex digits are header-safe"))
    }

    fn unindexed(mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        Self(value)
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

    /// The id as a header value, taken out.
    pub fn into_header_value(self) -> HeaderValue {
        self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A keyed permutation of the 64-bit values: every step (xor, multiply by an odd number,
/// xor with its own high half) can be undone, so distinct counters never share an id, as
/// a hash of them could (a hash's collisions come within about 2^32 ids).
fn permute(mut x: u64, keys: &[u64; 4]) -> u64 {
    for [add, multiply] in [[keys[0], keys[1]], [keys[2], keys[3]]] {
        x ^= add;
        x = x.wrapping_mul(multiply | 1);
        x ^= x >> 32;
    }
    x
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
    fn ids_are_never_indexed_by_header_compression() {
        assert!(given("abc").header_value().is_sensitive());
        assert!(RequestId::generate().header_value().is_sensitive());
    }

    #[test]
    fn ids_come_from_a_permutation() {
        // Undoing each step of `permute` gives the counter back.
        fn inverse(mut x: u64, keys: &[u64; 4]) -> u64 {
            for [add, multiply] in [[keys[2], keys[3]], [keys[0], keys[1]]] {
                x ^= x >> 32;
                // The inverse of an odd number modulo 2^64 (Newton's iteration).
                let odd = multiply | 1;
                let mut inverse = odd;
                for _ in 0..6 {
                    inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
                }
                x = x.wrapping_mul(inverse);
                x ^= add;
            }
            x
        }
        let keys = [0x9e37_79b9_7f4a_7c15, 2, u64::MAX, 0x1234_5678_9abc_def0];
        for n in [
            0,
            1,
            2,
            1 << 32,
            u64::MAX - 1,
            u64::MAX,
            0xdead_beef_cafe_f00d,
        ] {
            assert_eq!(inverse(permute(n, &keys), &keys), n, "{n:#x}");
        }
        assert_ne!(permute(1, &keys), permute(2, &keys));
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
