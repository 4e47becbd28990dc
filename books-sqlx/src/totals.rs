//! The totals of filtered lists, kept between pages. A filtered page's total is a
//! `COUNT(*)` of every book its filter keeps, which at a million books costs many times
//! the page itself. The count moves with every write (the triggers' version), so a total
//! counted at a version still holds at that version: each filter's last total is kept
//! with the version and the server it was counted at, and the page's statement counts
//! again only when, in its own snapshot, either differs. One statement still answers
//! the page, its version and its total, so the total is exact for the page it comes
//! with; pages 2, 3, … of a filter, and page 1 asked again, cost a page.
//!
//! The server ([`origin_sql`]) is what the version check's history guards against, read
//! where a replica can read it too: a count is a state only on the server and counter
//! table it was read from (a promoted standby, a restored backup or another node may
//! reach the same count with other books). And as the API drops its cache when a count
//! goes backwards (a backup restored into the same tables), a store that reads a count
//! lower than one it read before forgets every total.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::statement::Dialect;

/// How many filters' totals a store keeps; past it, it forgets them all and counts again
/// (a client asking for ever new filters costs the counts it cost before, no memory).
const KEPT: usize = 1024;

/// What the page's statement answers as its total when the kept one still holds.
pub(crate) const UNCHANGED: i64 = -1;

/// A total and where it was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The store's version in the count's snapshot.
    pub(crate) version: i64,
    /// The server and counter table it was read from ([`origin_sql`]).
    pub(crate) origin: i64,
    /// The books the filter kept.
    pub(crate) total: i64,
}

/// The last total of each filter (`F`) a store counted, shared by its clones.
#[derive(Debug)]
pub(crate) struct Totals<F> {
    kept: Mutex<HashMap<F, Counted>>,
    /// The highest count any of the store's reads saw.
    highest: AtomicI64,
}

impl<F> Default for Totals<F> {
    fn default() -> Self {
        Self {
            kept: Mutex::default(),
            highest: AtomicI64::default(),
        }
    }
}

impl<F: Hash + Eq + Clone> Totals<F> {
    /// The last total counted for `filter`.
    pub(crate) fn known(&self, filter: &F) -> Option<Counted> {
        self.kept.lock().ok()?.get(filter).copied()
    }

    /// A read of the store's saw `version`: one lower than a read saw before forgets
    /// every total (a replica behind the primary does too, which costs counts only).
    pub(crate) fn seen(&self, version: i64) {
        let before = self.highest.fetch_max(version, Ordering::AcqRel);
        if version < before {
            self.highest.store(version, Ordering::Release);
            if let Ok(mut totals) = self.kept.lock() {
                totals.clear();
            }
        }
    }

    /// `counted` is `filter`'s total now.
    pub(crate) fn keep(&self, filter: &F, counted: Counted) {
        let Ok(mut totals) = self.kept.lock() else {
            return;
        };
        if totals.len() >= KEPT && !totals.contains_key(filter) {
            totals.clear();
        }
        totals.insert(filter.clone(), counted);
    }

    /// The total a page's statement answered (`total`, at `version` on `origin`):
    /// `known`'s when the statement found it unchanged, otherwise `total`, kept.
    pub(crate) fn settle(
        &self,
        filter: &F,
        known: Option<Counted>,
        counted: Counted,
    ) -> Option<i64> {
        if counted.total != UNCHANGED {
            self.keep(filter, counted);
            return Some(counted.total);
        }
        known
            .filter(|known| known.version == counted.version && known.origin == counted.origin)
            .map(|known| known.total)
    }
}

/// The server and counter table a count is read from, as a `BIGINT` expression (`{db}`:
/// MariaDB's database of the tables as a string literal, or `NULL`), on a primary and a
/// replica alike.
pub(crate) fn origin_sql(dialect: Dialect) -> &'static str {
    match dialect {
        // A server started again (a restore, a rewind, a promotion) starts at another
        // time; a table written anew (a restore, `TRUNCATE`) gets another file.
        Dialect::Postgres => {
            "hashtextextended(pg_postmaster_start_time()::text || '/' || current_database() \
             || '/' || pg_relation_filenode('{s}book_count')::text, 0)"
        }
        // The version check's history: the server and when the counter table was created.
        Dialect::MySql => crate::check::history_sql(Dialect::MySql),
        // One file, which nothing replaces under a running store (docs/stores.md).
        Dialect::Sqlite => "0",
    }
}

/// `count` written to answer [`UNCHANGED`] when, in the statement's snapshot, the version
/// is `$version` and the origin `$origin` (the parameters numbered so).
pub(crate) fn count_unless_known(
    dialect: Dialect,
    count: &str,
    version: usize,
    origin: usize,
) -> String {
    format!(
        "CASE WHEN (SELECT CAST(SUM(version) AS {{int8}}) FROM {{s}}book_count) = ${version} \
         AND {} = ${origin} THEN {UNCHANGED} ELSE {count} END",
        origin_sql(dialect)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(year: i32) -> (String, i32) {
        ("b.year = $3".to_owned(), year)
    }

    fn counted(version: i64, origin: i64, total: i64) -> Counted {
        Counted {
            version,
            origin,
            total,
        }
    }

    #[test]
    fn a_count_is_kept_and_given_back_at_its_version_and_origin_only() {
        let totals = Totals::default();
        assert_eq!(
            totals.settle(&filter(2010), None, counted(7, 1, 38)),
            Some(38)
        );
        let known = totals.known(&filter(2010));
        assert_eq!(known, Some(counted(7, 1, 38)));
        assert_eq!(totals.known(&filter(2011)), None);
        // The statement found the version and origin unchanged.
        assert_eq!(
            totals.settle(&filter(2010), known, counted(7, 1, UNCHANGED)),
            Some(38)
        );
        // An answer of "unchanged" at another version or origin is not taken.
        assert_eq!(
            totals.settle(&filter(2010), known, counted(8, 1, UNCHANGED)),
            None
        );
        assert_eq!(
            totals.settle(&filter(2010), known, counted(7, 2, UNCHANGED)),
            None
        );
        assert_eq!(
            totals.settle(&filter(2010), None, counted(7, 1, UNCHANGED)),
            None
        );
        // A new count replaces the old.
        assert_eq!(
            totals.settle(&filter(2010), known, counted(9, 1, 39)),
            Some(39)
        );
        assert_eq!(totals.known(&filter(2010)), Some(counted(9, 1, 39)));
    }

    #[test]
    fn a_count_that_went_backwards_forgets_every_total() {
        let totals = Totals::default();
        totals.seen(5);
        totals.keep(&filter(2010), counted(7, 1, 38));
        totals.seen(7);
        totals.seen(9);
        assert_eq!(totals.known(&filter(2010)), Some(counted(7, 1, 38)));
        totals.seen(6);
        assert_eq!(totals.known(&filter(2010)), None);
        // From there on, as before.
        totals.keep(&filter(2010), counted(7, 1, 40));
        totals.seen(7);
        assert_eq!(totals.known(&filter(2010)), Some(counted(7, 1, 40)));
    }

    #[test]
    fn past_its_bound_the_store_forgets_and_counts_again() {
        let totals = Totals::default();
        for year in 0..KEPT as i32 {
            totals.keep(&filter(year), counted(1, 1, 1));
        }
        totals.keep(&filter(0), counted(2, 1, 2));
        assert_eq!(totals.known(&filter(1)), Some(counted(1, 1, 1)));
        totals.keep(&filter(-1), counted(1, 1, 1));
        assert_eq!(totals.known(&filter(1)), None);
        assert_eq!(totals.known(&filter(-1)), Some(counted(1, 1, 1)));
    }
}
