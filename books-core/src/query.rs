//! The `page` and `include` query parameters.

use std::borrow::Cow;

use crate::form::{InvalidUtf8, last_query_values};
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
    let [include] = last_query_values(query.unwrap_or(""), ["include"]);
    let mut errors = FieldErrors::default();
    let includes = parse_includes(include, &mut errors);
    if errors.is_empty() {
        Ok(includes)
    } else {
        Err(Problem::bad_query(errors))
    }
}

/// Reads `page` and `include` (the list); both are checked and reported together.
pub(crate) fn page_and_includes(query: Option<&str>) -> Result<(u64, Includes), Problem> {
    let [page, include] = last_query_values(query.unwrap_or(""), ["page", "include"]);
    let mut errors = FieldErrors::default();
    let page = match page {
        Ok(None) => Some(1),
        Ok(Some(text)) => parse_page(&text),
        Err(_) => None,
    };
    if page.is_none() {
        errors.add("page", PAGE_INVALID);
    }
    let includes = parse_includes(include, &mut errors);
    match page {
        Some(page) if errors.is_empty() => Ok((page, includes)),
        _ => Err(Problem::bad_query(errors)),
    }
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

fn parse_includes(
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
