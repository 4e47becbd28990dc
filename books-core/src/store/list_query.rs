//! What a list asks a store for: which books (a filter), in which order (a sort), which
//! slice of them (offset and limit).

use std::cmp::Ordering;

use super::{BookRecord, BookStore};

/// The list queries tier: the store's [`list`](BookStore::list) (and
/// [`list_versioned`](super::Versions::list_versioned)) honour a [`ListQuery`]'s filter
/// and sort, so the API serves `filter[…]` and `sort` (without it, 501 for a list that
/// asks for either).
///
/// The rules, which the tier's conformance cases check:
///
/// 1. The list holds the books the [filter](ListQuery::filter) keeps
///    ([`ListQuery::matches`]), in the [sort](ListQuery::sort)'s order with ties by id
///    ascending ([`ListQuery::compare`]); the total counts the books the filter keeps.
/// 2. The page and its total come from one snapshot, as for a plain list: on PostgreSQL
///    one statement (or a `REPEATABLE READ` transaction), on MariaDB one statement (or a
///    consistent-snapshot transaction), on SQLite one statement or transaction.
/// 3. A title filter matches as [`fold_title`] says: ASCII letters compared
///    case-insensitively, every other character exactly (`%`, `_` and `\` are plain
///    characters).
pub trait ListQueries: BookStore {}

/// Which books a [`list`](super::BookStore::list) asks for: those the filter keeps, in
/// the sort's order (ties, and the default order, by id ascending), `limit` of them
/// after the first `offset`. A store without the
/// [list queries tier](ListQueries) is only ever asked for
/// plain lists ([`is_plain`](Self::is_plain)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ListQuery {
    /// How many books of the list to skip.
    pub offset: u64,
    /// The most books to return.
    pub limit: u32,
    /// Which books the list holds.
    pub filter: ListFilter,
    /// The list's order before ties, which go by id ascending; empty: by id.
    pub sort: Vec<SortKey>,
}

/// Which books a list holds: those every part keeps (an empty part keeps every book).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ListFilter {
    /// Books whose author is any of these.
    pub author_ids: Vec<i64>,
    /// Books published in any of these years.
    pub years: Vec<YearRange>,
    /// Books whose title contains this, ASCII letters compared case-insensitively and
    /// every other character exactly ([`fold_title`]).
    pub title: Option<String>,
}

/// Years from `from` to `to`, both included; an end left open has no bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct YearRange {
    /// The first year, if bounded.
    pub from: Option<i32>,
    /// The last year, if bounded.
    pub to: Option<i32>,
}

/// A field a list may be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortField {
    /// The id.
    Id,
    /// The title, as the title filter compares ([`fold_title`]), then by code point.
    Title,
    /// The publication year.
    Year,
    /// When the book was created.
    CreatedAt,
    /// When the book was last written.
    UpdatedAt,
}

/// One key of a sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SortKey {
    /// The field.
    pub field: SortField,
    /// Largest first.
    pub descending: bool,
}

impl ListQuery {
    /// Up to `limit` books after the first `offset`, of every book by id.
    pub fn new(offset: u64, limit: u32) -> Self {
        Self {
            offset,
            limit,
            ..Self::default()
        }
    }

    /// The same slice of the books `filter` keeps.
    pub fn with_filter(self, filter: ListFilter) -> Self {
        Self { filter, ..self }
    }

    /// The same slice in `sort`'s order (ties by id ascending).
    pub fn with_sort(self, sort: Vec<SortKey>) -> Self {
        Self { sort, ..self }
    }

    /// Every book, by id: what a store without the list queries tier is asked for.
    pub fn is_plain(&self) -> bool {
        self.filter.is_empty() && self.sort.is_empty()
    }

    /// Whether the list holds `book` (for stores that filter in memory).
    pub fn matches(&self, book: &BookRecord) -> bool {
        self.filter.matches(book)
    }

    /// The list's order of two books (for stores that sort in memory): the sort's keys,
    /// then id ascending.
    pub fn compare(&self, a: &BookRecord, b: &BookRecord) -> Ordering {
        self.sort
            .iter()
            .map(|key| {
                let order = match key.field {
                    SortField::Id => a.id.cmp(&b.id),
                    SortField::Title => fold_title(&a.title).cmp(&fold_title(&b.title)),
                    SortField::Year => a.year.cmp(&b.year),
                    SortField::CreatedAt => a.created_at.cmp(&b.created_at),
                    SortField::UpdatedAt => a.updated_at.cmp(&b.updated_at),
                };
                if key.descending {
                    order.reverse()
                } else {
                    order
                }
            })
            .find(|order| order.is_ne())
            .unwrap_or_else(|| a.id.cmp(&b.id))
    }
}

impl ListFilter {
    /// Keeps every book.
    pub fn is_empty(&self) -> bool {
        self.author_ids.is_empty() && self.years.is_empty() && self.title.is_none()
    }

    /// Whether `book` is kept.
    pub fn matches(&self, book: &BookRecord) -> bool {
        let author = self.author_ids.is_empty()
            || book
                .author_id
                .is_some_and(|id| self.author_ids.contains(&id));
        let year = self.years.is_empty() || self.years.iter().any(|r| r.contains(book.year));
        let title = self
            .title
            .as_deref()
            .is_none_or(|part| fold_title(&book.title).contains(&fold_title(part)));
        author && year && title
    }
}

impl YearRange {
    /// One year.
    pub fn year(year: i32) -> Self {
        Self {
            from: Some(year),
            to: Some(year),
        }
    }

    /// Whether `year` is in the range.
    pub fn contains(&self, year: i32) -> bool {
        self.from.is_none_or(|from| year >= from) && self.to.is_none_or(|to| year <= to)
    }
}

/// A title as the title filter and sort compare it: ASCII letters lowercased, every other
/// character as it is (then compared by code point, which UTF-8's byte order keeps).
pub fn fold_title(title: &str) -> String {
    title.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

    fn book(id: i64, title: &str, year: i32, author_id: Option<i64>) -> BookRecord {
        BookRecord {
            id,
            title: title.into(),
            year,
            author_id,
            author_name: None,
            created_at: DateTime::UNIX_EPOCH,
            updated_at: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn filters_keep_what_every_part_keeps() {
        let dune = book(1, "Dune Messiah", 2015, Some(3));
        let filter =
            |author_ids: Vec<i64>, years: Vec<YearRange>, title: Option<&str>| ListFilter {
                author_ids,
                years,
                title: title.map(Into::into),
            };
        assert!(filter(vec![], vec![], None).matches(&dune));
        assert!(filter(vec![5, 3], vec![], Some("dUNE")).matches(&dune));
        assert!(!filter(vec![5], vec![], None).matches(&dune));
        let since = YearRange {
            from: Some(2015),
            to: None,
        };
        assert!(filter(vec![], vec![YearRange::year(2010), since], None).matches(&dune));
        assert!(!filter(vec![], vec![YearRange::year(2016)], None).matches(&dune));
        assert!(
            !filter(vec![], vec![], Some("%")).matches(&dune),
            "no wildcards"
        );
        let accented = book(2, "Élan", 2020, None);
        assert!(filter(vec![], vec![], Some("Élan")).matches(&accented));
        assert!(
            !filter(vec![], vec![], Some("élan")).matches(&accented),
            "ASCII only"
        );
        assert!(
            !filter(vec![1], vec![], None).matches(&accented),
            "no author"
        );
    }

    #[test]
    fn sorts_break_ties_by_id() {
        let (a, b, c) = (
            book(1, "beta", 2020, None),
            book(2, "Alpha", 2020, None),
            book(3, "alpha", 2019, None),
        );
        let by = |sort: Vec<SortKey>| {
            let query = ListQuery::new(0, 10).with_sort(sort);
            let mut books = [&a, &b, &c];
            books.sort_by(|x, y| query.compare(x, y));
            books.map(|book| book.id)
        };
        let key = |field, descending| SortKey { field, descending };
        assert_eq!(by(vec![]), [1, 2, 3]);
        assert_eq!(by(vec![key(SortField::Title, false)]), [2, 3, 1]);
        assert_eq!(by(vec![key(SortField::Year, true)]), [1, 2, 3]);
        assert_eq!(
            by(vec![
                key(SortField::Year, false),
                key(SortField::Title, true)
            ]),
            [3, 1, 2]
        );
        assert_eq!(by(vec![key(SortField::Id, true)]), [3, 2, 1]);
    }
}
