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
//! Compressed bodies are kept in the cache by the identity tag they were made from (a
//! hash of the identity bytes, so a kept body never goes stale), within the cache's
//! limits: a repeated answer, cached or not, costs a lookup rather than a compression.

use std::io::Write;

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, ETAG, HeaderValue, VARY};
use http::{HeaderMap, Response, StatusCode};

use crate::cache::Cache;
use crate::etag;
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

    /// Its `Content-Encoding` token, one of [`etag::CODINGS`].
    fn token(self) -> &'static str {
        match self {
            Coding::Br => etag::CODINGS[0],
            Coding::Zstd => etag::CODINGS[1],
            Coding::Gzip => etag::CODINGS[2],
        }
    }

    /// Its place among [`PREFERRED`](Self::PREFERRED) (0, 1 or 2), for tables of one
    /// body in each coding.
    #[cfg(feature = "docs-page")]
    pub(crate) fn slot(self) -> usize {
        match self {
            Coding::Br => 0,
            Coding::Zstd => 1,
            Coding::Gzip => 2,
        }
    }

    /// `body` compressed, or `None` if the encoder failed (the answer goes as it is).
    pub(crate) fn compress(self, body: &[u8]) -> Option<Vec<u8>> {
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
                // as servers compressing on the fly choose (`scripts/load.py --edge` measures it).
                let params = brotli::enc::BrotliEncoderParams {
                    quality: 5,
                    lgwin: 22,
                    ..Default::default()
                };
                brotli::BrotliCompress(&mut &body[..], &mut out, &params).ok()?;
                Some(out)
            }
            // ruzstd (pure Rust) at its fastest level, about zstd's level 1: the C
            // library's build took a core for 22 s of the first build (`cargo build --release
            // --timings` on a fresh clone). Its encoder is young: a panic in it costs the answer its
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

/// `Vary: Accept, Accept-Encoding` on an answer that has or may have encoded variants
/// (books, pages and the OpenAPI document, whatever their size; their 304s copy it),
/// set where it is rendered so that a cached answer carries it.
pub(crate) fn vary(response: &mut Response<Bytes>) {
    response.headers_mut().insert(VARY, VARY_ENCODINGS);
}

/// Encodes a GET or HEAD answer for `request` (see the module's doc): a 200 of
/// [`MIN_SIZE`] bytes or more in the chosen coding, with its variant's `ETag` (the body
/// left as it is when `If-None-Match` names that tag: the 304 follows), the compressed
/// body kept in `cache` by the identity tag. Its `Vary` was set where it was rendered
/// ([`vary`]).
pub(crate) fn encode(cache: Option<&Cache>, request: &HeaderMap, response: &mut Response<Bytes>) {
    encode_with(request, response, |coding, tag, body| {
        compressed(cache, tag, coding, body)
    });
}

/// [`encode`] with the compressed body from `compress` (given the coding, the identity
/// tag and the identity body), for answers whose encodings are kept elsewhere.
pub(crate) fn encode_with(
    request: &HeaderMap,
    response: &mut Response<Bytes>,
    compress: impl FnOnce(Coding, Option<HeaderValue>, &Bytes) -> Option<Bytes>,
) {
    // Header lookups cost about a hundred instructions each: a small answer asks none.
    if response.status() != StatusCode::OK || response.body().len() < MIN_SIZE {
        return;
    }
    // The core's answers are never encoded before this (the one place it happens).
    let Some(coding) = choose(request) else {
        return;
    };
    let tag = response.headers().get(ETAG).cloned();
    let variant = tag
        .as_ref()
        .and_then(|tag| etag::variant(tag, coding.token()));
    if let Some(variant) = &variant
        && etag::none_match_names(request, variant.as_bytes())
    {
        response.headers_mut().insert(ETAG, variant.clone());
        return;
    }
    let Some(body) = compress(coding, tag, response.body()) else {
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

/// `body` in `coding`: kept in `cache` by `tag` when there are both.
fn compressed(
    cache: Option<&Cache>,
    tag: Option<HeaderValue>,
    coding: Coding,
    body: &Bytes,
) -> Option<Bytes> {
    let kept = cache.zip(tag);
    if let Some((cache, tag)) = &kept
        && let Some(body) = cache.encoded(tag, coding.token())
    {
        return Some(body);
    }
    let compressed = Bytes::from(coding.compress(body)?);
    if let Some((cache, tag)) = kept {
        cache.keep_encoded(tag, coding.token(), compressed.clone());
    }
    Some(compressed)
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
    fn compressed_bodies_are_kept_by_their_identity_tag() {
        let cache = Cache::new(crate::config::CacheLimits::default(), None);
        let body = Bytes::from("x".repeat(4096));
        let tag = HeaderValue::from_static("\"7\"");
        let once = compressed(Some(&cache), Some(tag.clone()), Coding::Gzip, &body).unwrap();
        assert_eq!(cache.encoded(&tag, "gzip"), Some(once.clone()));
        let other = Bytes::from("y".repeat(4096));
        let again = compressed(Some(&cache), Some(tag), Coding::Gzip, &other).unwrap();
        assert_eq!(once, again, "found by the tag, not compressed again");
    }

    #[test]
    fn every_coding_has_variant_tags() {
        for coding in Coding::PREFERRED {
            assert!(etag::CODINGS.contains(&coding.token()));
        }
    }
}
