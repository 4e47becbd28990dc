//! The create/update rules, each with its message; every failing field is reported.

use crate::body::{Fields, Raw};
use crate::problem::{AUTHOR_INVALID, FieldErrors, Problem};
use crate::store::{BookInput, BookStore};
use crate::xml::is_xml_char;

const TITLE_MAX_CHARS: usize = 255;
const YEAR_MIN: i128 = 2000;

/// Checks `fields` against the contract's rules, returning the input to store, a 422
/// problem with every failing field, or a store failure. Whether the author exists is
/// left to the write (which fails with `AuthorNotFound`) unless another field fails
/// too: then `store` is asked, so that the 422 names every failing field.
pub(crate) async fn validate(
    fields: Fields,
    store: &dyn BookStore,
    current_year: i32,
) -> Result<BookInput, Problem> {
    let title = title(fields.title);
    let author_id = match integer(&fields.author_id) {
        Err(Missing) => Err("The author id field is required."),
        Err(NotInteger) => Err("The author id must be an integer."),
        Ok(id) => i64::try_from(id)
            .ok()
            .filter(|id| *id >= 1)
            .ok_or(AUTHOR_INVALID),
    };
    let year = match integer(&fields.year) {
        Err(Missing) => Err("The year field is required.".to_owned()),
        Err(NotInteger) => Err("The year must be an integer.".to_owned()),
        Ok(year) if year < YEAR_MIN => Err("The year must be at least 2000.".to_owned()),
        Ok(year) if year > i128::from(current_year) => {
            Err(format!("The year may not be greater than {current_year}."))
        }
        Ok(year) => Ok(year as i32),
    };
    let author_id = match author_id {
        Ok(id) if title.is_err() || year.is_err() => {
            match crate::metrics::store_call("author_exists", store.author_exists(id)).await? {
                true => Ok(id),
                false => Err(AUTHOR_INVALID),
            }
        }
        checked => checked,
    };
    let mut errors = FieldErrors::default();
    if let Err(message) = &title {
        errors.add("title", *message);
    }
    if let Err(message) = &author_id {
        errors.add("author_id", *message);
    }
    if let Err(message) = &year {
        errors.add("year", message.as_str());
    }
    match (title, author_id, year) {
        (Ok(title), Ok(author_id), Ok(year)) => Ok(BookInput {
            title,
            author_id,
            year,
        }),
        _ => Err(Problem::invalid(errors)),
    }
}

fn title(raw: Raw) -> Result<String, &'static str> {
    let text = match raw {
        Raw::Missing => return Err("The title field is required."),
        Raw::Text(text) => text,
        Raw::Number(_) | Raw::Other => return Err("The title must be a string."),
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        Err("The title field is required.")
    } else if trimmed.chars().count() > TITLE_MAX_CHARS {
        Err("The title may not be greater than 255 characters.")
    } else if trimmed
        .chars()
        .any(|c| c <= '\u{1f}' || c == '\u{7f}' || !is_xml_char(c))
    {
        Err("The title may not contain control characters.")
    } else if trimmed.len() == text.len() {
        Ok(text)
    } else {
        Ok(trimmed.to_owned())
    }
}

enum NotAnInteger {
    Missing,
    NotInteger,
}
use NotAnInteger::{Missing, NotInteger};

/// An integer field: optional sign and decimal digits, from a JSON number's literal or
/// from text (surrounding whitespace ignored). Values beyond 64 bits saturate far outside
/// every valid range, so they fail the range rule, not the integer rule, however sent.
fn integer(raw: &Raw) -> Result<i128, NotAnInteger> {
    let text = match raw {
        Raw::Missing => return Err(Missing),
        Raw::Other => return Err(NotInteger),
        Raw::Number(literal) => literal.as_str(),
        Raw::Text(text) => text.trim(),
    };
    if text.is_empty() {
        return Err(Missing);
    }
    let (negative, digits) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NotInteger);
    }
    let magnitude = digits.parse::<i128>().unwrap_or(i128::MAX);
    Ok(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        let text = |s: &str| integer(&Raw::Text(s.into()));
        assert!(matches!(text("2005"), Ok(2005)));
        assert!(matches!(text(" 2005 "), Ok(2005)));
        assert!(matches!(text("-3"), Ok(-3)));
        assert!(matches!(text("+3"), Ok(3)));
        assert!(matches!(text(""), Err(Missing)));
        for bad in ["2005.0", "1e3", "abc", "-", "0x10", "1 2"] {
            assert!(matches!(text(bad), Err(NotInteger)), "{bad}");
        }
        assert!(matches!(
            text("99999999999999999999999999999999999999999999"),
            Ok(i128::MAX)
        ));
        let number = |s: &str| integer(&Raw::Number(s.into()));
        assert!(matches!(number("2005"), Ok(2005)));
        assert!(matches!(number("-7"), Ok(-7)));
        assert!(matches!(number("100000000000000000000"), Ok(n) if n == 100000000000000000000));
        for bad in ["2005.0", "1e3", "-1.5E2"] {
            assert!(matches!(number(bad), Err(NotInteger)), "{bad}");
        }
        assert!(matches!(integer(&Raw::Other), Err(NotInteger)));
    }

    #[test]
    fn titles() {
        let text = |s: &str| title(Raw::Text(s.into()));
        assert_eq!(text("  Dune "), Ok("Dune".into()));
        assert_eq!(text(" \t "), Err("The title field is required."));
        assert_eq!(text(&"é".repeat(255)), Ok("é".repeat(255)));
        assert!(text(&"é".repeat(256)).is_err());
        assert_eq!(
            text("a\u{0}b"),
            Err("The title may not contain control characters.")
        );
        for bad in ["a\u{7f}b", "bad\u{ffff}char", "\u{fffe}x"] {
            assert_eq!(
                text(bad),
                Err("The title may not contain control characters."),
                "{bad:?}"
            );
        }
        assert_eq!(
            title(Raw::Number("3".into())),
            Err("The title must be a string.")
        );
    }
}
