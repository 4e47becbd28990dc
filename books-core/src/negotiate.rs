//! `Accept` negotiation between JSON and XML (RFC 9110 §12.5.1).

use http::HeaderMap;
use http::header::ACCEPT;
use mime::Mime;

use crate::fields;

/// A response format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Xml,
}

/// One parsed media range: its specificity (0 = `*/*`, 1 = `type/*`, 2 = exact) and q in thousandths.
struct Range {
    mime: Mime,
    specificity: u8,
    q: u16,
}

/// Picks the format for the request's `Accept` headers, or `None` when neither is acceptable.
///
/// No header, an empty one, or one with no parsable range means "anything" (JSON).
/// Unparsable ranges are ignored. Each format takes the q of the most specific range
/// matching it; a tie goes to JSON.
pub(crate) fn negotiate(headers: &HeaderMap) -> Option<Format> {
    if !fields::has(headers, &ACCEPT) {
        return Some(Format::Json);
    }
    let accept = headers.get_all(ACCEPT);
    let mut lines = accept.iter();
    // Most requests send no `Accept` or one of three values: answered without parsing.
    match (lines.next(), lines.next()) {
        (None, _) => return Some(Format::Json),
        (Some(only), None) => match only.as_bytes() {
            b"*/*" | b"application/json" => return Some(Format::Json),
            b"application/xml" => return Some(Format::Xml),
            _ => {}
        },
        _ => {}
    }
    let ranges: Vec<Range> = accept
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(parse_range)
        .collect();
    if ranges.is_empty() {
        return Some(Format::Json);
    }
    let json = quality(&ranges, "application", "json");
    let xml = quality(&ranges, "application", "xml").max(quality(&ranges, "text", "xml"));
    match (json, xml) {
        (0, 0) => None,
        (json, xml) if xml > json => Some(Format::Xml),
        _ => Some(Format::Json),
    }
}

fn parse_range(text: &str) -> Option<Range> {
    let mime: Mime = text.trim().parse().ok()?;
    let specificity = match (mime.type_().as_str(), mime.subtype().as_str()) {
        ("*", "*") => 0,
        ("*", _) => return None,
        (_, "*") => 1,
        _ => 2,
    };
    let q = match mime.get_param("q") {
        Some(q) => parse_q(q.as_str())?,
        None => 1000,
    };
    Some(Range {
        mime,
        specificity,
        q,
    })
}

/// RFC 9110 qvalue: `0[.ddd]` or `1[.000]`, in thousandths (`Accept` and
/// `Accept-Encoding` alike).
pub(crate) fn parse_q(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{fraction:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// The q of the most specific ranges matching `type/subtype` (the highest among equals); 0 if none.
fn quality(ranges: &[Range], type_: &str, subtype: &str) -> u16 {
    ranges
        .iter()
        .filter(|r| match r.specificity {
            0 => true,
            1 => r.mime.type_().as_str().eq_ignore_ascii_case(type_),
            _ => {
                r.mime.type_().as_str().eq_ignore_ascii_case(type_)
                    && r.mime.subtype().as_str().eq_ignore_ascii_case(subtype)
            }
        })
        .map(|r| (r.specificity, r.q))
        .max()
        .map_or(0, |(_, q)| q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(accept: &str) -> Option<Format> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, accept.parse().unwrap());
        negotiate(&headers)
    }

    #[test]
    fn q_values_follow_rfc_9110() {
        assert_eq!(negotiate(&HeaderMap::new()), Some(Format::Json));
        assert_eq!(pick(""), Some(Format::Json));
        assert_eq!(pick("*/*"), Some(Format::Json));
        assert_eq!(pick("application/*"), Some(Format::Json));
        assert_eq!(pick("text/*"), Some(Format::Xml));
        assert_eq!(pick("TEXT/XML"), Some(Format::Xml));
        assert_eq!(
            pick("application/xml, application/json"),
            Some(Format::Json)
        );
        assert_eq!(pick("application/json;q=0.5, text/xml"), Some(Format::Xml));
        assert_eq!(pick("application/json;q=0, */*"), Some(Format::Xml));
        assert_eq!(pick("*/*;q=0"), None);
        assert_eq!(pick("text/*, text/xml;q=0"), None);
        assert_eq!(pick("text/html"), None);
        assert_eq!(
            pick("text/html, garbage, application/xml;q=0.1"),
            Some(Format::Xml)
        );
        assert_eq!(
            pick("application/json;q=2"),
            Some(Format::Json),
            "bad q ignored"
        );
        assert_eq!(pick("application/xml;q=0.001"), Some(Format::Xml));
    }

    #[test]
    fn common_values_and_several_lines() {
        assert_eq!(pick("application/json"), Some(Format::Json));
        assert_eq!(pick("application/xml"), Some(Format::Xml));
        let mut headers = HeaderMap::new();
        headers.append(ACCEPT, "application/json;q=0.1".parse().unwrap());
        headers.append(ACCEPT, "application/xml".parse().unwrap());
        assert_eq!(negotiate(&headers), Some(Format::Xml), "every line counts");
        headers.append(ACCEPT, "*/*".parse().unwrap());
        assert_eq!(negotiate(&headers), Some(Format::Xml));
    }

    #[test]
    fn q_parsing_is_strict() {
        assert_eq!(parse_q("1"), Some(1000));
        assert_eq!(parse_q("1.000"), Some(1000));
        assert_eq!(parse_q("0.5"), Some(500));
        assert_eq!(parse_q("0.125"), Some(125));
        assert_eq!(parse_q("0"), Some(0));
        assert_eq!(parse_q("1.5"), None);
        assert_eq!(parse_q("0.1234"), None);
        assert_eq!(parse_q("-0"), None);
        assert_eq!(parse_q(""), None);
    }
}
