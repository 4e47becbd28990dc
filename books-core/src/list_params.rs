//! The list's query: `page` and `include` (in [`query`](crate::query)), `filter[…]` and
//! `sort`, read and checked together (every error at once, keyed by the parameter's
//! decoded name), and written back into the page's links.

use std::borrow::Cow;
use std::fmt::Write as _;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::form::{Found, last_query_values, query_keys};
use crate::problem::{FieldErrors, Problem};
use crate::query::{self, Includes};
use crate::store::{ListFilter, SortField, SortKey, YearRange};
use crate::xml::xml_safe;

/// The filters the list takes, by name.
const FILTERS: [&str; 3] = ["author_id", "year", "title"];

/// The longest title filter, in characters (as a title).
const TITLE_MAX_CHARS: usize = 255;

/// What a list request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListRequest {
    pub(crate) page: u64,
    pub(crate) includes: Includes,
    pub(crate) filter: ListFilter,
    pub(crate) sort: Vec<SortKey>,
    /// `filter[…]` and `sort` as the page's links carry them (`&`-led, percent-encoded,
    /// the values as the request gave them), or empty.
    pub(crate) carried: String,
}

impl ListRequest {
    /// Every book by id: no filter, no sort.
    pub(crate) fn is_plain(&self) -> bool {
        self.filter.is_empty() && self.sort.is_empty()
    }
}

/// Reads the list's query: 400 with every bad parameter.
pub(crate) fn list_request(query: Option<&str>) -> Result<ListRequest, Problem> {
    if let Some((page, includes)) = query::common_page_query(query) {
        return Ok(ListRequest {
            page,
            includes,
            ..ListRequest::default()
        });
    }
    let text = query.unwrap_or("");
    let [page, include, author_ids, years, title, sort] = last_query_values(
        text,
        [
            "page",
            "include",
            "filter[author_id]",
            "filter[year]",
            "filter[title]",
            "sort",
        ],
    );
    let mut errors = FieldErrors::default();
    let page = query::page(page, &mut errors);
    let includes = query::parse_includes(include, &mut errors);
    let mut carried = String::new();
    let author_ids = value("filter[author_id]", author_ids, &mut errors, &mut carried);
    let years = value("filter[year]", years, &mut errors, &mut carried);
    let title = value("filter[title]", title, &mut errors, &mut carried);
    let sort = value("sort", sort, &mut errors, &mut carried);
    let filter = ListFilter {
        author_ids: author_ids.map_or_else(Vec::new, |ids| parse_author_ids(&ids, &mut errors)),
        years: years.map_or_else(Vec::new, |years| parse_years(&years, &mut errors)),
        title: title.and_then(|title| parse_title(title, &mut errors)),
    };
    let sort = sort.map_or_else(Vec::new, |sort| parse_sort(&sort, &mut errors));
    unknown_filters(text, &mut errors);
    match page {
        Some(page) if errors.is_empty() => Ok(ListRequest {
            page,
            includes,
            filter,
            sort,
            carried,
        }),
        _ => Err(Problem::bad_query(errors)),
    }
}

/// A parameter's value if it has one (empty is absent), carried into the links; its error
/// if it is not UTF-8.
fn value<'a>(
    name: &'static str,
    found: Found<'a>,
    errors: &mut FieldErrors,
    carried: &mut String,
) -> Option<Cow<'a, str>> {
    match found {
        Err(_) => {
            errors.add(name, format!("The {name} parameter is not valid UTF-8."));
            None
        }
        Ok(None) => None,
        Ok(Some(value)) if value.is_empty() => None,
        Ok(Some(value)) => {
            carry(carried, name, &value);
            Some(value)
        }
    }
}

/// What the links percent-encode: everything but RFC 3986's unreserved characters.
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Appends `&name=value` to `carried`, both percent-encoded for a link.
fn carry(carried: &mut String, name: &str, value: &str) {
    let name = utf8_percent_encode(name, RESERVED);
    let value = utf8_percent_encode(value, RESERVED);
    write!(carried, "&{name}={value}").expect("writing to a String");
}

/// Comma-separated items, spaces around each trimmed.
fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim)
}

fn parse_author_ids(value: &str, errors: &mut FieldErrors) -> Vec<i64> {
    let ids: Option<Vec<i64>> = items(value)
        .map(|item| {
            let digits = !item.is_empty() && item.bytes().all(|b| b.is_ascii_digit());
            digits
                .then(|| item.parse::<i64>().ok())
                .flatten()
                .filter(|&id| id >= 1)
        })
        .collect();
    ids.unwrap_or_else(|| {
        errors.add(
            "filter[author_id]",
            "The filter[author_id] must be one author id or several, comma-separated, \
             each an integer from 1 to 9223372036854775807.",
        );
        Vec::new()
    })
}

fn parse_years(value: &str, errors: &mut FieldErrors) -> Vec<YearRange> {
    const INVALID: &str = "The filter[year] must be a year, several comma-separated, or a \
                           range with either end open (2010..2020, 2015.., ..2005); each year \
                           an integer from 1 to 9999.";
    let year = |text: &str| -> Result<Option<i32>, ()> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let valid = text.len() <= 4 && text.bytes().all(|b| b.is_ascii_digit());
        match valid.then(|| text.parse::<i32>().ok()).flatten() {
            Some(year) if year >= 1 => Ok(Some(year)),
            _ => Err(()),
        }
    };
    let mut ranges = Vec::new();
    for item in items(value) {
        let range = match item.split_once("..") {
            Some((from, to)) => match (year(from), year(to)) {
                (Ok(from), Ok(to)) if from.is_some() || to.is_some() => YearRange { from, to },
                _ => {
                    errors.add("filter[year]", INVALID);
                    return Vec::new();
                }
            },
            None => match year(item) {
                Ok(Some(one)) => YearRange::year(one),
                _ => {
                    errors.add("filter[year]", INVALID);
                    return Vec::new();
                }
            },
        };
        if let YearRange {
            from: Some(from),
            to: Some(to),
        } = range
            && from > to
        {
            errors.add(
                "filter[year]",
                format!("The filter[year] range {from}..{to} starts after it ends."),
            );
            return Vec::new();
        }
        ranges.push(range);
    }
    ranges
}

fn parse_title(title: Cow<'_, str>, errors: &mut FieldErrors) -> Option<String> {
    if title.chars().count() > TITLE_MAX_CHARS {
        errors.add(
            "filter[title]",
            "The filter[title] may not be greater than 255 characters.",
        );
        return None;
    }
    Some(title.into_owned())
}

fn parse_sort(value: &str, errors: &mut FieldErrors) -> Vec<SortKey> {
    const ALLOWED: &str = "Allowed keys: id, title, year, created_at, updated_at, each \
                           optionally prefixed with - for descending.";
    let mut keys: Vec<SortKey> = Vec::new();
    for item in items(value) {
        let (descending, name) = match item.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, item),
        };
        let field = match name {
            "id" => SortField::Id,
            "title" => SortField::Title,
            "year" => SortField::Year,
            "created_at" => SortField::CreatedAt,
            "updated_at" => SortField::UpdatedAt,
            other => {
                errors.add(
                    "sort",
                    format!("Unknown sort key: {}. {ALLOWED}", xml_safe(other)),
                );
                return Vec::new();
            }
        };
        if keys.iter().any(|key| key.field == field) {
            errors.add(
                "sort",
                format!("The sort key {name} is given twice. {ALLOWED}"),
            );
            return Vec::new();
        }
        keys.push(SortKey { field, descending });
    }
    // Ids are unique: nothing after an id key orders anything, and `id` alone is the
    // default order.
    if let Some(at) = keys.iter().position(|key| key.field == SortField::Id) {
        keys.truncate(at + 1);
    }
    if let [
        SortKey {
            field: SortField::Id,
            descending: false,
        },
    ] = keys[..]
    {
        keys.clear();
    }
    keys
}

/// A 400 for each `filter[name]` the list does not take.
fn unknown_filters(query: &str, errors: &mut FieldErrors) {
    for key in query_keys(query) {
        let Some(name) = key
            .strip_prefix("filter[")
            .and_then(|rest| rest.strip_suffix(']'))
        else {
            continue;
        };
        if !FILTERS.contains(&name) {
            errors.add(
                key.clone().into_owned(),
                format!(
                    "Unknown filter: {}. Allowed filters: author_id, year, title.",
                    xml_safe(name)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests;
