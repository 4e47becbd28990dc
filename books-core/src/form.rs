//! `application/x-www-form-urlencoded` pairs, decoded strictly (bad UTF-8 is an error).

use percent_encoding::percent_decode;

/// A form component was not valid UTF-8 once percent-decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InvalidUtf8;

/// The value of the last pair named `name` (the last one counts), if any.
pub(crate) fn last_value(input: &[u8], name: &str) -> Result<Option<String>, InvalidUtf8> {
    let mut found = None;
    for pair in input.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[..0]),
        };
        let matches = if is_plain(key) {
            key == name.as_bytes()
        } else {
            decode(key)? == name
        };
        if matches {
            found = Some(value);
        }
    }
    found.map(decode).transpose()
}

/// ASCII with nothing to decode: the common case, compared and copied as is.
fn is_plain(raw: &[u8]) -> bool {
    raw.iter().all(|&b| b.is_ascii() && b != b'%' && b != b'+')
}

fn decode(raw: &[u8]) -> Result<String, InvalidUtf8> {
    if is_plain(raw) {
        return std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| InvalidUtf8);
    }
    let spaced: Vec<u8> = raw
        .iter()
        .map(|&b| if b == b'+' { b' ' } else { b })
        .collect();
    let text = percent_decode(&spaced)
        .decode_utf8()
        .map_err(|_| InvalidUtf8)?;
    Ok(text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_last_value() {
        let body = b"title=A+b%20c&year=1&title=Second&flag";
        assert_eq!(
            last_value(body, "title").unwrap().as_deref(),
            Some("Second")
        );
        assert_eq!(last_value(body, "year").unwrap().as_deref(), Some("1"));
        assert_eq!(last_value(body, "flag").unwrap().as_deref(), Some(""));
        assert_eq!(last_value(body, "none").unwrap(), None);
        assert_eq!(
            last_value(b"t=A+b%20c", "t").unwrap().as_deref(),
            Some("A b c")
        );
        assert_eq!(
            last_value("t=%C3%A9".as_bytes(), "t").unwrap().as_deref(),
            Some("é")
        );
    }

    #[test]
    fn rejects_bad_utf8() {
        assert_eq!(last_value(b"t=%FF", "t"), Err(InvalidUtf8));
        assert_eq!(last_value(b"t=\xff", "t"), Err(InvalidUtf8));
        assert_eq!(last_value(b"%FF=1", "t"), Err(InvalidUtf8));
    }
}
