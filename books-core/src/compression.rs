//! Compressed answers (RFC 9110 §8.4, §12.5.3): `gzip`, `br` or `zstd`, as the request's
//! `Accept-Encoding` prefers, for answers of [`MIN_SIZE`] bytes or more.
//!
//! Each encoding is a representation of its own, so it gets a strong `ETag` of its own
//! (§8.8.3): the identity tag with `-gzip`, `-br` or `-zstd` inside the quotes. A proxy
//! that compresses behind the API and keeps the identity tag (tower-http's
//! `CompressionLayer` does) breaks that rule: a cache may then answer a conditional
//! request for one encoding with the other's bytes. `If-None-Match` with an encoded
//! variant's tag gets a 304 when that encoding is still the one chosen; the identity
//! tag's 304 stands for the identity bytes the client holds.
//!
//! Compressed bodies are kept by the identity tag they were made from (a hash of the
//! identity bytes, so a kept body never goes stale), under the cache's limits: a
//! repeated answer, cached or not, costs a lookup rather than a compression.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, ETAG, HeaderValue, VARY};
use http::{HeaderMap, Response, StatusCode};

use crate::cache::CacheLimits;
use crate::conditional;
use crate::fields;
use crate::negotiate::parse_q;

/// Smallest body compressed: below it, the encoding's framing eats most of the gain.
pub(crate) const MIN_SIZE: usize = 1024;

/// `Vary` of a negotiated answer that has encoded variants.
const VARY_ENCODINGS: HeaderValue = HeaderValue::from_static("Accept, Accept-Encoding");

/// A content coding the API compresses with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Coding {
    Gzip,
    Br,
    Zstd,
}

impl Coding {
    /// In the order a tie in `Accept-Encoding` goes: the best ratio first.
    const PREFERRED: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// `body` compressed, or `None` if the encoder failed (the answer goes as it is).
    fn compress(self, body: &[u8]) -> Option<Vec<u8>> {
        match self {
            Coding::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
                encoder.write_all(body).ok()?;
                encoder.finish().ok()
            }
            Coding::Br => {
                let mut out = Vec::new();
                // Quality 5 of 11: close to the best ratio on JSON at a tenth of its time,
                // as servers compressing on the fly choose (BENCHMARKS.md, "Issue 24").
                let params = brotli::enc::BrotliEncoderParams {
                    quality: 5,
                    lgwin: 22,
                    ..Default::default()
                };
                brotli::BrotliCompress(&mut &body[..], &mut out, &params).ok()?;
                Some(out)
            }
            // ruzstd (pure Rust) at its fastest level, about zstd's level 1: the C
            // library's build took a core for 22 s of the first build (BENCHMARKS.md,
            // "First build"). Its encoder is young: a panic in it costs the answer its
            // compression, not the request.
            Coding::Zstd => std::panic::catch_unwind(|| {
                ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
            })
            .ok(),
        }
    }
}

/// The coding for a request's `Accept-Encoding`: the acceptable one with the highest
/// q-value (ties as [`Coding::PREFERRED`]), `None` for identity: no header, nothing of
/// ours acceptable, or `identity` listed with a higher q. Malformed elements are skipped.
pub(crate) fn choose(request: &HeaderMap) -> Option<Coding> {
    if !fields::has(request, &ACCEPT_ENCODING) {
        return None;
    }
    let listed = request.get_all(ACCEPT_ENCODING).iter();
    // q-values in thousandths: ours, identity's, and `*`'s.
    let mut q: [Option<u16>; 3] = [None; 3];
    let (mut identity, mut any) = (None, None);
    for element in listed
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
    {
        let mut parts = element.split(';');
        let token = parts.next().unwrap_or_default().trim();
        let Some(weight) = parts.try_fold(1000, |weight, param| {
            let (name, value) = param.split_once('=')?;
            if name.trim().eq_ignore_ascii_case("q") {
                parse_q(value.trim())
            } else {
                Some(weight)
            }
        }) else {
            continue;
        };
        let slot = match token.to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => &mut q[0],
            "br" => &mut q[1],
            "zstd" => &mut q[2],
            "identity" => &mut identity,
            "*" => &mut any,
            _ => continue,
        };
        *slot = Some(weight);
    }
    let of = |coding: Coding| match coding {
        Coding::Gzip => q[0],
        Coding::Br => q[1],
        Coding::Zstd => q[2],
    };
    let (best, weight) = Coding::PREFERRED
        .into_iter()
        .map(|coding| (coding, of(coding).or(any).unwrap_or(0)))
        .fold((None, 0), |(best, top), (coding, weight)| {
            if weight > top {
                (Some(coding), weight)
            } else {
                (best, top)
            }
        });
    // Identity is acceptable unless excluded; a client that prefers it gets it.
    // Identity stays acceptable unless excluded, but wins only where listed above them.
    best.filter(|_| weight >= identity.unwrap_or(0))
}

/// `tag` (a strong `"…"`) for the `coding` variant: `"…-gzip"`.
fn variant_tag(tag: &HeaderValue, coding: Coding) -> Option<HeaderValue> {
    let inner = tag.as_bytes().strip_suffix(b"\"")?;
    let mut variant = Vec::with_capacity(tag.len() + 6);
    variant.extend_from_slice(inner);
    variant.push(b'-');
    variant.extend_from_slice(coding.token().as_bytes());
    variant.push(b'"');
    HeaderValue::from_bytes(&variant).ok()
}

/// Whether `tag` is an encoded variant's tag of `identity` (`"…-gzip"` of `"…"`).
pub(crate) fn is_variant_of(tag: &[u8], identity: &[u8]) -> bool {
    let (Some(tag), Some(identity)) = (tag.strip_suffix(b"\""), identity.strip_suffix(b"\""))
    else {
        return false;
    };
    tag.strip_prefix(identity)
        .and_then(|rest| rest.strip_prefix(b"-"))
        .is_some_and(|coding| {
            Coding::PREFERRED
                .iter()
                .any(|known| known.token().as_bytes() == coding)
        })
}

/// Compression as the API does it, with the compressed bodies it keeps.
#[derive(Debug)]
pub(crate) struct Compression {
    kept: Option<(Mutex<Kept>, CacheLimits)>,
}

#[derive(Debug, Default)]
struct Kept {
    bodies: HashMap<(HeaderValue, Coding), Bytes, foldhash::fast::RandomState>,
    bytes: usize,
}

/// `Vary: Accept, Accept-Encoding` on an answer that has or may have encoded variants
/// (books, pages and the OpenAPI document, whatever their size; their 304s copy it),
/// set where it is rendered so that a cached answer carries it.
pub(crate) fn vary(response: &mut Response<Bytes>) {
    response.headers_mut().insert(VARY, VARY_ENCODINGS);
}

impl Compression {
    /// Keeping compressed bodies within `limits` (none kept without).
    pub(crate) fn new(limits: Option<CacheLimits>) -> Self {
        Self {
            kept: limits.map(|limits| (Mutex::default(), limits)),
        }
    }

    /// Encodes a GET or HEAD answer for `request` (see the module's doc): a 200 of
    /// [`MIN_SIZE`] bytes or more in the chosen coding, with its variant's `ETag` (the
    /// body left as it is when `If-None-Match` names that tag: the 304 follows). Its
    /// `Vary` was set where it was rendered ([`vary`]).
    pub(crate) fn encode(&self, request: &HeaderMap, response: &mut Response<Bytes>) {
        // Header lookups cost about a hundred instructions each: a small answer asks none.
        if response.status() != StatusCode::OK || response.body().len() < MIN_SIZE {
            return;
        }
        // The core's answers are never encoded before this (the one place it happens).
        let Some(coding) = choose(request) else {
            return;
        };
        let tag = response.headers().get(ETAG).cloned();
        let variant = tag.as_ref().and_then(|tag| variant_tag(tag, coding));
        if let Some(variant) = &variant
            && conditional::none_match_names(request, variant.as_bytes())
        {
            response.headers_mut().insert(ETAG, variant.clone());
            return;
        }
        let Some(body) = self.compressed(tag, coding, response.body()) else {
            return;
        };
        let headers = response.headers_mut();
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        if let Some(variant) = variant {
            headers.insert(ETAG, variant);
        }
        *response.body_mut() = body;
    }

    /// `body` in `coding`: kept by `tag` when it has one.
    fn compressed(&self, tag: Option<HeaderValue>, coding: Coding, body: &Bytes) -> Option<Bytes> {
        let kept = self.kept.as_ref().zip(tag);
        if let Some(((kept, _), tag)) = &kept
            && let Some(body) = lock(kept).bodies.get(&(tag.clone(), coding))
        {
            return Some(body.clone());
        }
        let compressed = Bytes::from(coding.compress(body)?);
        if let Some(((kept, limits), tag)) = kept {
            let mut kept = lock(kept);
            let size = compressed.len();
            while !kept.bodies.is_empty()
                && (kept.bodies.len() >= limits.entries || kept.bytes + size > limits.bytes)
            {
                let victim = kept.bodies.keys().next().expect("not empty").clone();
                let removed = kept.bodies.remove(&victim).expect("present");
                kept.bytes -= removed.len();
            }
            if size <= limits.bytes && limits.entries > 0 {
                kept.bytes += size;
                if let Some(old) = kept.bodies.insert((tag, coding), compressed.clone()) {
                    kept.bytes -= old.len();
                }
            }
        }
        Some(compressed)
    }
}

fn lock(kept: &Mutex<Kept>) -> std::sync::MutexGuard<'_, Kept> {
    kept.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn accepting(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn the_highest_q_wins_ties_go_to_br() {
        let pick = |values: &[&str]| choose(&accepting(values));
        assert_eq!(pick(&[]), None);
        assert_eq!(pick(&[""]), None);
        assert_eq!(pick(&["gzip"]), Some(Coding::Gzip));
        assert_eq!(pick(&["x-gzip"]), Some(Coding::Gzip));
        assert_eq!(pick(&["gzip, deflate, br, zstd"]), Some(Coding::Br));
        assert_eq!(pick(&["gzip;q=1.0, br;q=0.8"]), Some(Coding::Gzip));
        assert_eq!(pick(&["gzip;q=0.5", "zstd;q=0.9"]), Some(Coding::Zstd));
        assert_eq!(pick(&["*"]), Some(Coding::Br));
        assert_eq!(pick(&["*;q=0.5, br;q=0"]), Some(Coding::Zstd));
        assert_eq!(pick(&["gzip;q=0"]), None);
        assert_eq!(pick(&["deflate, compress"]), None);
        // Identity preferred over what we offer.
        assert_eq!(pick(&["gzip;q=0.5, identity"]), None);
        assert_eq!(pick(&["gzip;q=0.5, identity;q=0"]), Some(Coding::Gzip));
        // Malformed q-values skip their element.
        assert_eq!(pick(&["br;q=2, gzip"]), Some(Coding::Gzip));
        assert_eq!(pick(&["br;q=0.1234, gzip;q=0.1"]), Some(Coding::Gzip));
        assert_eq!(pick(&["br;q=, gzip;q=abc"]), None);
    }

    #[test]
    fn every_coding_round_trips() {
        let body = "{\"title\":\"A book\"}".repeat(100);
        let gzip = Coding::Gzip.compress(body.as_bytes()).unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gzip[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, body);
        let br = Coding::Br.compress(body.as_bytes()).unwrap();
        let mut out = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut out).unwrap();
        assert_eq!(out, body.as_bytes());
        let zstd = Coding::Zstd.compress(body.as_bytes()).unwrap();
        assert_eq!(unzstd(&zstd), body.as_bytes());
        assert!(gzip.len() < body.len() / 10 && br.len() < gzip.len());
        // Past zstd's 128 KiB block, and nothing to find in it.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert_eq!(unzstd(&Coding::Zstd.compress(&noise).unwrap()), noise);
    }

    fn unzstd(compressed: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut source = compressed;
        ruzstd::decoding::StreamingDecoder::new(&mut source)
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Whatever the bytes (JSON and XML carry what clients wrote), every coding
        /// compresses them without failing and gives them back.
        #[test]
        fn any_bytes_round_trip(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20_000)) {
            for coding in Coding::PREFERRED {
                let compressed = coding.compress(&body).expect("compresses");
                let back = match coding {
                    Coding::Zstd => unzstd(&compressed),
                    Coding::Gzip => {
                        let mut out = Vec::new();
                        flate2::read::GzDecoder::new(&compressed[..]).read_to_end(&mut out).unwrap();
                        out
                    }
                    Coding::Br => {
                        let mut out = Vec::new();
                        brotli::BrotliDecompress(&mut &compressed[..], &mut out).unwrap();
                        out
                    }
                };
                proptest::prop_assert_eq!(back, body.clone());
            }
        }
    }

    #[test]
    fn variant_tags_keep_the_quotes() {
        let tag = HeaderValue::from_static("\"0123abcd\"");
        let gzip = variant_tag(&tag, Coding::Gzip).unwrap();
        assert_eq!(gzip, "\"0123abcd-gzip\"");
        assert_eq!(variant_tag(&tag, Coding::Br).unwrap(), "\"0123abcd-br\"");
        assert!(is_variant_of(gzip.as_bytes(), tag.as_bytes()));
        assert!(is_variant_of(b"\"0123abcd-zstd\"", tag.as_bytes()));
        assert!(!is_variant_of(tag.as_bytes(), tag.as_bytes()));
        assert!(!is_variant_of(b"\"0123abcd-deflate\"", tag.as_bytes()));
        assert!(!is_variant_of(b"\"0123abcdgzip\"", tag.as_bytes()));
        assert!(!is_variant_of(b"\"0123abc-gzip\"", tag.as_bytes()));
    }

    #[test]
    fn kept_bodies_stay_within_the_limits() {
        let compression = Compression::new(Some(CacheLimits {
            entries: 2,
            bytes: 1 << 20,
        }));
        let body = Bytes::from("x".repeat(4096));
        for n in 0..5 {
            let tag = HeaderValue::from_str(&format!("\"{n}\"")).unwrap();
            let once = compression.compressed(Some(tag.clone()), Coding::Gzip, &body);
            let again = compression.compressed(Some(tag), Coding::Gzip, &body);
            assert_eq!(once, again);
        }
        let kept = lock(&compression.kept.as_ref().unwrap().0);
        assert_eq!(kept.bodies.len(), 2);
        assert_eq!(
            kept.bytes,
            kept.bodies.values().map(Bytes::len).sum::<usize>()
        );
    }
}
