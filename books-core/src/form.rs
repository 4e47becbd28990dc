//! `application/x-www-form-urlencoded` pairs, decoded strictly (bad UTF-8 is an error).

use std::borrow::Cow;
use std::ops::Range;

use percent_encoding::percent_decode;

/// A form component was not valid UTF-8 once percent-decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InvalidUtf8;

/// The value of the last pair named `name` (the last one counts), if any; borrowed from
/// `input` when there is nothing to decode.
pub(crate) fn last_value<'a>(
    input: &'a [u8],
    name: &str,
) -> Result<Option<Cow<'a, str>>, InvalidUtf8> {
    let [value] = last_values(input, [name]);
    value
}

/// A name's value as found: decoded, or absent, or not UTF-8.
pub(crate) type Found<'a> = Result<Option<Cow<'a, str>>, InvalidUtf8>;

/// [`last_value`] of each of `names`, in one pass over `input`. A key that is not valid
/// UTF-8 fails every name (it could have been any of them).
pub(crate) fn last_values<'a, const N: usize>(input: &'a [u8], names: [&str; N]) -> [Found<'a>; N] {
    values(last_ranges(input, names), |range| decode(&input[range]))
}

/// [`last_values`] of a query string, whose plain values need no UTF-8 check again.
pub(crate) fn last_query_values<'a, const N: usize>(
    query: &'a str,
    names: [&str; N],
) -> [Found<'a>; N] {
    values(last_ranges(query.as_bytes(), names), |range| {
        // Ranges start after an `=` and end before an `&` or at the end: on character
        // boundaries.
        let raw = &query[range];
        if is_plain(raw.as_bytes()) {
            Ok(Cow::Borrowed(raw))
        } else {
            decode(raw.as_bytes())
        }
    })
}

/// Each found range's value, by `decode`.
fn values<'a, const N: usize>(
    found: Result<[Option<Range<usize>>; N], InvalidUtf8>,
    mut decode: impl FnMut(Range<usize>) -> Result<Cow<'a, str>, InvalidUtf8>,
) -> [Found<'a>; N] {
    let mut values = [const { Ok(None) }; N];
    match found {
        // A loop rather than `array::map`, whose closures were not inlined here.
        Ok(found) => {
            for (value, range) in values.iter_mut().zip(found) {
                *value = range.map(&mut decode).transpose();
            }
        }
        Err(error) => values.fill(Err(error)),
    }
    values
}

/// Every key of `query`, decoded (keys that are not UTF-8 once decoded are left out).
pub(crate) fn query_keys(query: &str) -> impl Iterator<Item = Cow<'_, str>> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| decode(pair.split('=').next().unwrap_or_default().as_bytes()).ok())
}

/// Where in `input` the last value of each of `names` lies.
fn last_ranges<const N: usize>(
    input: &[u8],
    names: [&str; N],
) -> Result<[Option<Range<usize>>; N], InvalidUtf8> {
    let mut found = [const { None }; N];
    let mut start = 0;
    for pair in input.split(|&b| b == b'&') {
        let end = start + pair.len();
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], start + at + 1..end),
            None => (pair, end..end),
        };
        start = end + 1;
        if pair.is_empty() {
            continue;
        }
        // A key spelled as a name is plain (names are); any other is decoded only if it
        // needs to be.
        let named = match names.iter().position(|name| key == name.as_bytes()) {
            None if !is_plain(key) => {
                let key = decode(key)?;
                names.iter().position(|name| key == *name)
            }
            named => named,
        };
        if let Some(at) = named {
            found[at] = Some(value);
        }
    }
    Ok(found)
}

/// ASCII with nothing to decode: the common case, compared and copied as is.
fn is_plain(raw: &[u8]) -> bool {
    raw.iter().all(|&b| b.is_ascii() && b != b'%' && b != b'+')
}

fn decode(raw: &[u8]) -> Result<Cow<'_, str>, InvalidUtf8> {
    if is_plain(raw) {
        // Plain means ASCII: always UTF-8.
        return std::str::from_utf8(raw)
            .map(Cow::Borrowed)
            .map_err(|_| InvalidUtf8);
    }
    let spaced: Vec<u8> = raw
        .iter()
        .map(|&b| if b == b'+' { b' ' } else { b })
        .collect();
    let text = percent_decode(&spaced)
        .decode_utf8()
        .map_err(|_| InvalidUtf8)?;
    Ok(Cow::Owned(text.into_owned()))
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
    fn several_names_in_one_pass() {
        let [page, include, none] =
            last_values(b"page=2&incl%75de=a%2Cb&page=3", ["page", "include", "x"]);
        assert_eq!(page.unwrap().as_deref(), Some("3"));
        assert_eq!(include.unwrap().as_deref(), Some("a,b"));
        assert_eq!(none.unwrap(), None);
        // A bad value fails its own name; a bad key fails every name.
        let [page, include] = last_values(b"page=%FF&include=author", ["page", "include"]);
        assert_eq!(page, Err(InvalidUtf8));
        assert_eq!(include.unwrap().as_deref(), Some("author"));
        let [page, include] = last_values(b"page=1&%FF=x", ["page", "include"]);
        assert_eq!((page, include), (Err(InvalidUtf8), Err(InvalidUtf8)));
    }

    #[test]
    fn query_values_as_bytes_would_be() {
        for query in [
            "page=2&incl%75de=a%2Cb&page=3",
            "page=%FF&include=author",
            "page=1&%FF=x",
            "&&page=&include&é=ü&page=4&",
            "include=a+b%20c&page=%C3%A9",
        ] {
            let names = ["page", "include", "x"];
            assert_eq!(
                last_query_values(query, names),
                last_values(query.as_bytes(), names),
                "{query}"
            );
        }
        let [page] = last_query_values("é=1&page=ü", ["page"]);
        assert_eq!(page.unwrap().as_deref(), Some("ü"));
    }

    #[test]
    fn rejects_bad_utf8() {
        assert_eq!(last_value(b"t=%FF", "t"), Err(InvalidUtf8));
        assert_eq!(last_value(b"t=\xff", "t"), Err(InvalidUtf8));
        assert_eq!(last_value(b"%FF=1", "t"), Err(InvalidUtf8));
    }
}
