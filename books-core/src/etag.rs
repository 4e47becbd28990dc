//! Entity tags (RFC 9110 §8.8.3, §13.1): computing a book's or page's strong `ETag`, the
//! tags of its compressed variants, and comparing tags with `If-None-Match` and
//! `If-Match`.

use http::HeaderMap;
use http::header::{HeaderValue, IF_MATCH, IF_NONE_MATCH};
use xxhash_rust::xxh3::Xxh3;

use crate::fields;

/// The content codings whose variants have tags of their own (`"…-gzip"`): the ones the
/// API compresses with (`compression.rs`).
pub(crate) const CODINGS: [&str; 3] = ["br", "zstd", "gzip"];

/// A strong entity tag for `body` as served with `content_type`: XXH3 (64 bits, a fixed
/// seed) of both, so the same bytes get the same tag in every process and release, and
/// JSON, XML and each `include` get their own. XXH3 hashes a 5 KB page in well under a
/// microsecond, where SipHash would add a quarter to the in-memory list handler.
pub(crate) fn for_body(content_type: &[u8], body: &[u8]) -> HeaderValue {
    let mut hasher = Xxh3::new();
    hasher.update(content_type);
    hasher.update(&[0]);
    hasher.update(body);
    HeaderValue::try_from(format!("\"{:016x}\"", hasher.digest())).expect("hex is header-safe")
}

/// Whether `If-None-Match` (every field line of it) matches `tag`: `*`, or any listed
/// entity-tag whose opaque part equals `tag`'s, `W/` ignored. A malformed list matches
/// nothing from the first malformed element on, so it never causes a 304.
pub(crate) fn none_match_names(request: &HeaderMap, tag: &[u8]) -> bool {
    if !fields::has(request, &IF_NONE_MATCH) {
        return false;
    }
    let current = opaque(tag);
    request.get_all(IF_NONE_MATCH).iter().any(|value| {
        // The common case, and the cheap one: the tag a client was given, sent back as is.
        if value.as_bytes() == tag {
            return true;
        }
        let mut rest = value.as_bytes();
        loop {
            rest = rest.trim_ascii_start();
            while let [b',', tail @ ..] = rest {
                rest = tail.trim_ascii_start();
            }
            if rest.is_empty() {
                return false;
            }
            if let [b'*', tail @ ..] = rest {
                if tail.trim_ascii_start().is_empty() {
                    return true;
                }
                return false;
            }
            let Some((tag, tail)) = entity_tag(rest) else {
                return false;
            };
            if Some(tag) == current {
                return true;
            }
            rest = tail;
        }
    })
}

/// `tag` (a strong `"…"`) for its variant in `coding` (one of [`CODINGS`]): `"…-gzip"`.
pub(crate) fn variant(tag: &HeaderValue, coding: &str) -> Option<HeaderValue> {
    let inner = tag.as_bytes().strip_suffix(b"\"")?;
    let mut variant = Vec::with_capacity(tag.len() + coding.len() + 1);
    variant.extend_from_slice(inner);
    variant.push(b'-');
    variant.extend_from_slice(coding.as_bytes());
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
        .is_some_and(|coding| CODINGS.iter().any(|known| known.as_bytes() == coding))
}

/// A write's `If-Match` (§13.1.1): `*`, or the entity-tags it lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IfMatch {
    /// Any current representation.
    Any,
    /// These tags, each with its quotes (`"…"`); a weak one (`W/"…"`) is kept as such
    /// and never matches.
    Tags(Vec<Vec<u8>>),
}

impl IfMatch {
    /// The request's `If-Match`, every field line of it; `None` when it has none. A
    /// malformed list keeps the tags before the first malformed element (so it matches
    /// less, never more).
    pub(crate) fn from_headers(request: &HeaderMap) -> Option<Self> {
        let mut lines = request.get_all(IF_MATCH).iter().peekable();
        lines.peek()?;
        let mut tags = Vec::new();
        for value in lines {
            let mut rest = value.as_bytes();
            loop {
                rest = rest.trim_ascii_start();
                while let [b',', tail @ ..] = rest {
                    rest = tail.trim_ascii_start();
                }
                if rest.is_empty() {
                    break;
                }
                if let [b'*', tail @ ..] = rest {
                    if tail.trim_ascii_start().is_empty() {
                        return Some(Self::Any);
                    }
                    break;
                }
                let weak = rest.starts_with(b"W/");
                let Some((tag, tail)) = entity_tag(rest) else {
                    break;
                };
                tags.push(if weak {
                    [b"W/", tag].concat()
                } else {
                    tag.to_vec()
                });
                rest = tail;
            }
        }
        Some(Self::Tags(tags))
    }

    /// Whether `current` (a strong tag this module made, or none) is matched: strong
    /// comparison, so a weak listed tag never matches. A compressed variant's tag of
    /// `current` matches too: it names the same state of the book in another encoding.
    pub(crate) fn matches(&self, current: Option<&HeaderValue>) -> bool {
        match self {
            Self::Any => true,
            Self::Tags(tags) => current.is_some_and(|current| {
                let current = current.as_bytes();
                tags.iter()
                    .any(|tag| tag == current || is_variant_of(tag, current))
            }),
        }
    }
}

/// The first entity-tag of `input` (`W/"…"` or `"…"`): its opaque part with quotes, and
/// what follows it.
fn entity_tag(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let input = input.strip_prefix(b"W/").unwrap_or(input);
    let [b'"', inner @ ..] = input else {
        return None;
    };
    let end = inner.iter().position(|&b| b == b'"')?;
    let tag = &input[..end + 2];
    let tail = &inner[end + 1..];
    let next = tail.trim_ascii_start();
    (next.is_empty() || next[0] == b',').then_some((tag, tail))
}

/// The opaque part of a tag this module made (`"…"`).
fn opaque(tag: &[u8]) -> Option<&[u8]> {
    entity_tag(tag).map(|(tag, _)| tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(header: &[&str], current: &str) -> bool {
        let mut headers = HeaderMap::new();
        for value in header {
            headers.append(IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
        }
        none_match_names(&headers, current.as_bytes())
    }

    #[test]
    fn if_none_match_lists() {
        let tag = "\"00ff\"";
        assert!(matches(&["\"00ff\""], tag));
        assert!(matches(&["W/\"00ff\""], tag));
        assert!(matches(&["\"a\", \"00ff\""], tag));
        assert!(matches(&["\"a\",W/\"00ff\" , \"b\""], tag));
        assert!(matches(&["\"a\"", "\"00ff\""], tag));
        assert!(matches(&["*"], tag));
        assert!(matches(&[" * "], tag));
        assert!(matches(&[",,\"00ff\","], tag));
        assert!(matches(&["\"a,b\", \"00ff\""], tag), "commas inside a tag");
    }

    #[test]
    fn what_does_not_match() {
        let tag = "\"00ff\"";
        assert!(!matches(&[], tag));
        assert!(!matches(&[""], tag));
        assert!(!matches(&["\"00FF\""], tag), "opaque tags compare exactly");
        assert!(!matches(&["00ff"], tag), "unquoted");
        assert!(!matches(&["\"00ff"], tag), "unterminated");
        assert!(!matches(&["w/\"00ff\""], tag), "W/ is case-sensitive");
        assert!(!matches(&["\"a\" \"00ff\""], tag), "no comma between tags");
        assert!(!matches(&["*, \"00ff\""], tag), "* stands alone");
        assert!(!matches(&["garbage, \"00ff\""], tag));
    }

    fn if_match(header: &[&str]) -> Option<IfMatch> {
        let mut headers = HeaderMap::new();
        for value in header {
            headers.append(IF_MATCH, HeaderValue::from_str(value).unwrap());
        }
        IfMatch::from_headers(&headers)
    }

    #[test]
    fn if_match_compares_strongly() {
        let tag = HeaderValue::from_static("\"00ff\"");
        let current = Some(&tag);
        let yes = |h: &[&str]| if_match(h).unwrap().matches(current);
        assert!(yes(&["\"00ff\""]));
        assert!(yes(&["\"a\", \"00ff\""]));
        assert!(yes(&["\"a\"", " \"00ff\" "]), "several field lines");
        assert!(yes(&["*"]));
        assert!(!yes(&["W/\"00ff\""]), "a weak tag never matches");
        assert!(!yes(&["\"00FF\""]));
        assert!(!yes(&["00ff"]), "unquoted");
        assert!(
            !yes(&["garbage, \"00ff\""]),
            "nothing after a malformed element"
        );
        assert!(!yes(&["*, \"00ff\""]), "* stands alone");
        assert!(!yes(&[""]), "present but empty: matches nothing");
        assert!(if_match(&[]).is_none(), "absent");
        assert!(
            !if_match(&["\"00ff\""]).unwrap().matches(None),
            "no current tag"
        );
    }

    #[test]
    fn variant_tags_keep_the_quotes() {
        let tag = HeaderValue::from_static("\"0123abcd\"");
        let gzip = variant(&tag, "gzip").unwrap();
        assert_eq!(gzip, "\"0123abcd-gzip\"");
        assert_eq!(variant(&tag, "br").unwrap(), "\"0123abcd-br\"");
        assert!(is_variant_of(gzip.as_bytes(), tag.as_bytes()));
        assert!(is_variant_of(b"\"0123abcd-zstd\"", tag.as_bytes()));
        assert!(!is_variant_of(tag.as_bytes(), tag.as_bytes()));
        assert!(!is_variant_of(b"\"0123abcd-deflate\"", tag.as_bytes()));
        assert!(!is_variant_of(b"\"0123abcdgzip\"", tag.as_bytes()));
        assert!(!is_variant_of(b"\"0123abc-gzip\"", tag.as_bytes()));
    }

    #[test]
    fn tags_differ_by_body_and_type() {
        let json = for_body(b"application/json", b"{}");
        assert_eq!(json, for_body(b"application/json", b"{}"));
        assert_ne!(json, for_body(b"application/xml", b"{}"));
        assert_ne!(json, for_body(b"application/json", b"{ }"));
        let text = json.to_str().unwrap();
        assert!(text.len() == 18 && text.starts_with('"') && text.ends_with('"'));
    }
}
