//! The `page` and `include` query parameters (the list's others are in
//! [`list_params`](crate::list_params)).

use std::borrow::Cow;

use crate::form::{Found, InvalidUtf8, last_query_values};
use crate::problem::{FieldErrors, Problem};
use crate::xml::xml_safe;

const PAGE_INVALID: &str = "The page must be an integer of at least 1.";

/// Related resources a request asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Includes {
    pub(crate) author: bool,
}

impl Includes {
    /// The normalised `include` value for links, if any.
    pub(crate) fn as_query(self) -> Option<&'static str> {
        self.author.then_some("author")
    }
}

/// Reads `include` (every route that formats books).
pub(crate) fn includes(query: Option<&str>) -> Result<Includes, Problem> {
    // The two spellings nearly every request uses, without the general parser.
    match query {
        None | Some("") => return Ok(Includes::default()),
        Some("include=author") => return Ok(Includes { author: true }),
        _ => {}
    }
    let [include] = last_query_values(query.unwrap_or(""), ["include"]);
    let mut errors = FieldErrors::default();
    let includes = parse_includes(include, &mut errors);
    if errors.is_empty() {
        Ok(includes)
    } else {
        Err(Problem::bad_query(errors))
    }
}

/// The page `page` names (1 when absent), or `None` with its error added.
pub(crate) fn page(page: Found<'_>, errors: &mut FieldErrors) -> Option<u64> {
    let page = match page {
        Ok(None) => Some(1),
        Ok(Some(text)) => parse_page(&text),
        Err(_) => None,
    };
    if page.is_none() {
        errors.add("page", PAGE_INVALID);
    }
    page
}

/// The spellings nearly every list request uses, read without the general parser (a
/// third of a cached page's own work): nothing, or `page=<digits>` and `include=author`,
/// each at most once, in either order. Anything else is `None`: the general parser
/// decides.
pub(crate) fn common_page_query(query: Option<&str>) -> Option<(u64, Includes)> {
    let (mut page, mut includes) = (None, None);
    let query = query.unwrap_or_default().as_bytes();
    // Bytes, not `str::split`: its searcher costs more than these few bytes.
    for pair in query.split(|&b| b == b'&').filter(|_| !query.is_empty()) {
        let at = pair.iter().position(|&b| b == b'=')?;
        match (&pair[..at], &pair[at + 1..]) {
            (b"page", digits) if page.is_none() => {
                page = Some(parse_page(std::str::from_utf8(digits).ok()?)?);
            }
            (b"include", b"author") if includes.is_none() => {
                includes = Some(Includes { author: true });
            }
            _ => return None,
        }
    }
    Some((page.unwrap_or(1), includes.unwrap_or_default()))
}

/// `1..=i64::MAX`, decimal digits only.
fn parse_page(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>()
        .ok()
        .filter(|&p| p >= 1)
        .map(|p| p as u64)
}

pub(crate) fn parse_includes(
    raw: Result<Option<Cow<'_, str>>, InvalidUtf8>,
    errors: &mut FieldErrors,
) -> Includes {
    let Ok(raw) = raw else {
        errors.add("include", "The include parameter is not valid UTF-8.");
        return Includes::default();
    };
    let mut includes = Includes::default();
    if raw.as_deref() == Some("author") {
        // The one spelling nearly every request uses: nothing to split or trim.
        includes.author = true;
        return includes;
    }
    let mut unknown = Vec::new();
    for name in raw.iter().flat_map(|r| r.split(',')).map(str::trim) {
        match name {
            "" => {}
            "author" => includes.author = true,
            other => unknown.push(xml_safe(other)),
        }
    }
    if !unknown.is_empty() {
        errors.add(
            "include",
            format!(
                "Unknown include: {}. Allowed values: author.",
                unknown.join(", ")
            ),
        );
    }
    includes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list's page and includes, as the list reads them.
    fn page_and_includes(query: Option<&str>) -> Result<(u64, Includes), Problem> {
        crate::list_params::list_request(query).map(|request| (request.page, request.includes))
    }

    #[test]
    fn pages() {
        assert_eq!(page_and_includes(None).unwrap().0, 1);
        assert_eq!(page_and_includes(Some("page=3")).unwrap().0, 3);
        assert_eq!(page_and_includes(Some("page=2&page=4")).unwrap().0, 4);
        for bad in [
            "0",
            "-1",
            "abc",
            "1.5",
            "",
            "+2",
            "9223372036854775808",
            " 1",
        ] {
            let query = format!("page={bad}");
            assert!(page_and_includes(Some(&query)).is_err(), "{bad}");
        }
        assert_eq!(
            page_and_includes(Some("page=9223372036854775807"))
                .unwrap()
                .0,
            i64::MAX as u64
        );
    }

    #[test]
    fn common_queries_read_as_the_general_parser_reads_them() {
        for query in [
            None,
            Some(""),
            Some("page=3"),
            Some("include=author"),
            Some("include=author&page=2"),
            Some("page=2&include=author"),
            Some("page=2&page=4"),
            Some("page=0"),
            Some("page=x&include=author"),
            Some("include=author&include="),
            Some("&page=2"),
            Some("page=2&"),
            Some("include=publisher"),
            Some("page=%32"),
            Some("other=1&page=5"),
        ] {
            let general = {
                let [page, include] = last_query_values(query.unwrap_or(""), ["page", "include"]);
                let page = match page {
                    Ok(None) => Some(1),
                    Ok(Some(text)) => parse_page(&text),
                    Err(_) => None,
                };
                let mut errors = FieldErrors::default();
                let includes = parse_includes(include, &mut errors);
                page.filter(|_| errors.is_empty())
                    .map(|page| (page, includes))
            };
            if let Some(common) = common_page_query(query) {
                assert_eq!(Some(common), general, "{query:?}");
            }
            assert_eq!(page_and_includes(query).ok(), general, "{query:?}");
        }
        assert_eq!(
            common_page_query(Some("include=author&page=2")),
            Some((2, Includes { author: true }))
        );
        assert_eq!(common_page_query(None), Some((1, Includes::default())));
    }

    #[test]
    fn include_names() {
        assert_eq!(includes(None).unwrap(), Includes::default());
        assert_eq!(includes(Some("include=")).unwrap(), Includes::default());
        assert!(
            includes(Some("include=%20author%20,author"))
                .unwrap()
                .author
        );
        let problem = includes(Some("include=author,publisher")).unwrap_err();
        assert_eq!(problem.status, 400);
        assert!(includes(Some("include=author.books")).is_err());
    }
}
