//! The page envelope's `meta` and absolute `links`.

use serde::Serialize;

use crate::query::Includes;

/// `meta` of a page.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    pub(crate) page: u64,
    pub(crate) per_page: u32,
    pub(crate) total: u64,
    pub(crate) total_pages: u64,
}

impl Meta {
    pub(crate) fn new(page: u64, per_page: u32, total: u64) -> Self {
        Self {
            page,
            per_page,
            total,
            total_pages: total.div_ceil(u64::from(per_page)).max(1),
        }
    }

    /// The store offset of this page's first book (saturating far past the end).
    pub(crate) fn offset(page: u64, per_page: u32) -> u64 {
        (page - 1)
            .saturating_mul(u64::from(per_page))
            .min(i64::MAX as u64)
    }
}

/// `links` of a page; `prev` is null on page 1, `next` on the last page and beyond.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Links {
    #[serde(rename = "self")]
    pub(crate) self_: String,
    pub(crate) first: String,
    pub(crate) last: String,
    pub(crate) prev: Option<String>,
    pub(crate) next: Option<String>,
}

impl Links {
    /// Links for `meta`, under `list_url` (absolute, no query), keeping `include` and
    /// `carried` (the request's filters and sort, `&`-led and percent-encoded).
    pub(crate) fn new(list_url: &str, meta: &Meta, includes: Includes, carried: &str) -> Self {
        let link = |page: u64| match includes.as_query() {
            Some(include) => format!("{list_url}?page={page}&include={include}{carried}"),
            None => format!("{list_url}?page={page}{carried}"),
        };
        let last = meta.total_pages;
        Self {
            self_: link(meta.page),
            first: link(1),
            last: link(last),
            prev: (meta.page > 1).then(|| link((meta.page - 1).min(last))),
            next: (meta.page < last).then(|| link(meta.page + 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_links() {
        assert_eq!(Meta::new(1, 20, 0).total_pages, 1);
        assert_eq!(Meta::new(1, 20, 40).total_pages, 2);
        assert_eq!(Meta::new(1, 20, 41).total_pages, 3);
        assert_eq!(Meta::offset(3, 20), 40);
        assert_eq!(Meta::offset(u64::MAX, 20), i64::MAX as u64);
        let beyond = Links::new(
            "http://h/api/books",
            &Meta::new(9, 20, 45),
            Includes { author: true },
            "",
        );
        assert_eq!(
            beyond.prev.as_deref(),
            Some("http://h/api/books?page=3&include=author")
        );
        assert_eq!(beyond.next, None);
        let first = Links::new(
            "http://h/api/books",
            &Meta::new(1, 20, 45),
            Includes::default(),
            "&sort=-year",
        );
        assert_eq!(first.prev, None);
        assert_eq!(
            first.next.as_deref(),
            Some("http://h/api/books?page=2&sort=-year")
        );
        assert_eq!(first.last, "http://h/api/books?page=3&sort=-year");
    }
}
