//! The totals of filtered lists, and where their pages start, kept between pages. A
//! filtered page's total is a `COUNT(*)` of every book its filter keeps, which at a
//! million books costs many times the page itself. The count moves with every write (the triggers' version), so a total
//! counted at a version still holds at that version: each filter's last total is kept
//! with the version and the server it was counted at, and the page's statement counts
//! again only when, in its own snapshot, either differs. One statement still answers
//! the page, its version and its total, so the total is exact for the page it comes
//! with; pages 2, 3, … of a filter, and page 1 asked again, cost a page.
//!
//! A page in id order also tells where the filter's books stand at that version: as many
//! of them as its offset come before its first id ([`Mark`]). So a later page at the same
//! version starts from the nearest such mark below its offset instead of walking every
//! book before it: the next page from the last one's end, a deep page asked again from
//! its own first id. The statement answers whether the version held, as for the total;
//! if it moved, the page is asked again without the mark.
//!
//! A filter that keeps few books ([`LISTED`] at most, a title's say, whose page in id
//! order cannot stop early on a trigram index) has their ids kept too, read once per
//! version: its pages are then its books by id. A page whose statement finds the version
//! moved is asked again the same way.
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

use crate::statement::Dialect;

/// How many filters' totals a store keeps; past it, it forgets them all and counts again
/// (a client asking for ever new filters costs the counts it cost before, no memory).
const KEPT: usize = 1024;

/// How many marks a store keeps per filter; past it, each new one replaces the oldest.
const MARKS: usize = 8;

/// How many books a filter may keep for the store to keep their ids (a page of them is
/// then read by id), and how many ids it keeps over every filter: past it, it forgets
/// them all (2 MB).
pub(crate) const LISTED: usize = 4096;
const LISTED_IN_ALL: usize = 1 << 18;

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

/// Where a filter's books stand at a kept total's version: `before` of them have ids
/// below `id`, so the page at offset `o ≥ before` is the one at offset `o - before` of
/// those from `id` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// How many of the filter's books come before `id`.
    pub(crate) before: u64,
    /// The id the filter's books are asked from.
    pub(crate) id: i64,
}

impl Mark {
    /// The marks a page of the filter in id order at `offset` sets (`ids`: its books'
    /// ids, in order): at its first book, and just past its last.
    pub(crate) fn of_page(offset: u64, ids: &[i64]) -> Vec<Self> {
        let (Some(&first), Some(&last)) = (ids.first(), ids.last()) else {
            return Vec::new();
        };
        let mut marks = Vec::with_capacity(2);
        if offset > 0 {
            // A mark at 0 would skip nothing.
            marks.push(Self {
                before: offset,
                id: first,
            });
        }
        if let Some(id) = last.checked_add(1) {
            let before = offset.saturating_add(ids.len() as u64);
            marks.push(Self { before, id });
        }
        marks
    }
}

/// A filter's last total, with the marks and, if read, its books' ids at its version.
#[derive(Debug)]
struct Kept {
    counted: Counted,
    marks: Vec<Mark>,
    ids: Option<Vec<i64>>,
}

/// The last total of each filter (`F`) a store counted, shared by its clones.
#[derive(Debug)]
pub(crate) struct Totals<F>(Mutex<State<F>>);

#[derive(Debug)]
struct State<F> {
    kept: HashMap<F, Kept>,
    /// The highest count any of the store's reads saw.
    highest: i64,
    /// How many times the store forgot every total.
    forgotten: u64,
    /// How many ids the kept totals hold.
    listed: usize,
}

/// What a statement is sent with: the filter's kept total, if any; for a page in id
/// order, its books' ids if the filter's are kept, else the nearest mark at its version
/// below it, if any; and how many times the store had forgotten its totals then.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) counted: Option<Counted>,
    pub(crate) seek: Option<Mark>,
    /// The page's ids (none past the filter's last book).
    pub(crate) listed: Option<Vec<i64>>,
    /// Whether the filter keeps few enough books for their ids to be kept, and they
    /// are not.
    pub(crate) listable: bool,
    forgotten: u64,
}

impl Known {
    /// The same, with no total kept (nor mark, nor ids): the statement counts.
    pub(crate) fn counting(self) -> Self {
        Self {
            counted: None,
            seek: None,
            listed: None,
            listable: false,
            ..self
        }
    }
}

impl<F> State<F> {
    /// [`Totals::seen`], under the lock.
    fn see(&mut self, version: i64) {
        if version < self.highest {
            self.forget();
        }
        self.highest = version;
    }

    /// Forgets every total.
    fn forget(&mut self) {
        self.kept.clear();
        self.forgotten += 1;
        self.listed = 0;
    }
}

impl<F> Default for Totals<F> {
    fn default() -> Self {
        Self(Mutex::new(State {
            kept: HashMap::new(),
            highest: 0,
            forgotten: 0,
            listed: 0,
        }))
    }
}

impl<F: Hash + Eq + Clone> State<F> {
    /// Keeps `counted` as `filter`'s total, with `ids` if read (else those kept, if of
    /// its version, as its marks).
    fn keep(&mut self, filter: &F, counted: Counted, ids: Option<Vec<i64>>) {
        if self.kept.len() >= KEPT && !self.kept.contains_key(filter) {
            self.kept.clear();
            self.listed = 0;
        }
        let (mut marks, mut kept_ids) = (Vec::new(), None);
        if let Some(kept) = self.kept.remove(filter) {
            self.listed -= kept.ids.as_ref().map_or(0, Vec::len);
            // Marks and ids stand while the version does.
            if (kept.counted.version, kept.counted.origin) == (counted.version, counted.origin) {
                (marks, kept_ids) = (kept.marks, kept.ids);
            }
        }
        let ids = ids.or(kept_ids);
        self.listed += ids.as_ref().map_or(0, Vec::len);
        let kept = Kept {
            counted,
            marks,
            ids,
        };
        self.kept.insert(filter.clone(), kept);
    }
}

impl<F: Hash + Eq + Clone> Totals<F> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<F>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last total counted for `filter`, with, for a page in id order (`page`: its
    /// offset and limit), its ids if kept, else the nearest mark below it that skips
    /// any book.
    pub(crate) fn known(&self, filter: &F, page: Option<(u64, u32)>) -> Known {
        let state = self.state();
        let kept = state.kept.get(filter);
        let (mut seek, mut listed, mut listable) = (None, None, false);
        if let (Some(kept), Some((offset, limit))) = (kept, page) {
            if let Some(ids) = &kept.ids {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(ids.len());
                let end = start.saturating_add(limit as usize).min(ids.len());
                listed = Some(ids[start..end].to_vec());
            } else {
                let marks = kept.marks.iter();
                let below = marks.filter(|m| m.before > 0 && m.before <= offset);
                seek = below.max_by_key(|mark| mark.before).copied();
                listable = (1..=LISTED as i64).contains(&kept.counted.total);
            }
        }
        Known {
            counted: kept.map(|kept| kept.counted),
            seek,
            listed,
            listable,
            forgotten: state.forgotten,
        }
    }

    /// Keeps `ids`, every book of `filter`'s in id order, read at `at`'s version and
    /// origin by a statement sent with `known`, as its total, unless the store forgot
    /// its totals since or they are too many.
    pub(crate) fn list(&self, filter: &F, known: &Known, at: Counted, ids: Vec<i64>) {
        let mut state = self.state();
        state.see(at.version);
        if state.forgotten != known.forgotten || ids.len() > LISTED {
            return;
        }
        if state.listed + ids.len() > LISTED_IN_ALL {
            state.kept.values_mut().for_each(|kept| kept.ids = None);
            state.listed = 0;
        }
        let counted = Counted {
            total: ids.len() as i64,
            ..at
        };
        state.keep(filter, counted, Some(ids));
    }

    /// Keeps `marks`, read at `at`'s version and origin by a statement sent with
    /// `known`, if `filter`'s kept total is still of them and the store has not forgotten
    /// its totals since.
    pub(crate) fn mark(&self, filter: &F, known: &Known, at: Counted, marks: Vec<Mark>) {
        let mut state = self.state();
        if state.forgotten != known.forgotten {
            return;
        }
        let Some(kept) = state.kept.get_mut(filter) else {
            return;
        };
        if (kept.counted.version, kept.counted.origin) != (at.version, at.origin) {
            return;
        }
        for mark in marks {
            if !kept.marks.contains(&mark) {
                if kept.marks.len() == MARKS {
                    kept.marks.remove(0);
                }
                kept.marks.push(mark);
            }
        }
    }

    /// A read of the store's saw `version`: one lower than a read saw before forgets
    /// every total (a replica behind the primary does too, which costs counts only).
    pub(crate) fn seen(&self, version: i64) {
        self.state().see(version);
    }

    /// The total a statement sent with `known` answered (`counted`, its version
    /// [`seen`](Self::seen) first): its own count, kept unless the store forgot its
    /// totals since it was sent; or [`UNCHANGED`], `known`'s total if that still stands.
    /// `None`: the statement must count.
    pub(crate) fn settle(&self, filter: &F, known: &Known, counted: Counted) -> Option<i64> {
        let mut state = self.state();
        state.see(counted.version);
        let current = state.forgotten == known.forgotten;
        if counted.total != UNCHANGED {
            if current {
                state.keep(filter, counted, None);
            }
            return Some(counted.total);
        }
        known
            .counted
            .filter(|known| current && known.version == counted.version)
            .filter(|known| known.origin == counted.origin)
            .map(|known| known.total)
    }
}

/// The server and counter table a count is read from, as a `BIGINT` expression (`{db}`:
/// MariaDB's database of the tables as a string literal, or `NULL`), on a primary and a
/// replica alike.
pub(crate) fn origin_sql(dialect: Dialect) -> &'static str {
    match dialect {
        // A server started again (a physical restore, a rewind, another server behind
        // the same address) starts at another time; one promoted in place goes on with its
        // own history, which a count read on it followed; a table written anew (a
        // restore, `TRUNCATE`) gets another file.
        Dialect::Postgres => {
            "hashtextextended(extract(epoch FROM pg_postmaster_start_time())::text || '/' \
             || current_database() || '/' || pg_relation_filenode('{s}book_count')::text, 0)"
        }
        // The version check's history: the server and when the counter table was created.
        Dialect::MySql => crate::check::history_sql(Dialect::MySql),
        // One file, which nothing replaces under a running store (docs/stores.md).
        Dialect::Sqlite => "0",
    }
}

/// `count` written to answer [`UNCHANGED`] when, in the statement's snapshot, the version
/// and origin (`known`: as the statement reads them) are the parameters numbered
/// `numbers`.
pub(crate) fn count_unless_known(count: &str, known: [&str; 2], numbers: [usize; 2]) -> String {
    let ([version, origin], [v, o]) = (known, numbers);
    format!("CASE WHEN {version} = ${v} AND {origin} = ${o} THEN {UNCHANGED} ELSE {count} END")
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

    /// What the store answers for the filter of `year` read at `version` (origin 1),
    /// its statement counting `total` unless sent with a kept total of that version, and
    /// sent again to count when the kept one is refused, as `queries::list` does.
    fn read(totals: &Totals<(String, i32)>, year: i32, version: i64, total: i64) -> Option<i64> {
        let known = totals.known(&filter(year), None);
        let kept = known
            .counted
            .is_some_and(|k| k.version == version && k.origin == 1);
        let answered = if kept { UNCHANGED } else { total };
        let settled = totals.settle(&filter(year), &known, counted(version, 1, answered));
        settled.or_else(|| {
            let counting = totals.known(&filter(year), None).counting();
            totals.settle(&filter(year), &counting, counted(version, 1, total))
        })
    }

    #[test]
    fn a_count_is_kept_and_given_back_at_its_version_and_origin_only() {
        let totals = Totals::default();
        let known = totals.known(&filter(2010), None);
        assert_eq!(
            totals.settle(&filter(2010), &known, counted(7, 1, 38)),
            Some(38)
        );
        let known = totals.known(&filter(2010), None);
        assert_eq!(known.counted, Some(counted(7, 1, 38)));
        assert_eq!(totals.known(&filter(2011), None).counted, None);
        // The statement found the version and origin unchanged.
        let unchanged = |version, origin| counted(version, origin, UNCHANGED);
        assert_eq!(
            totals.settle(&filter(2010), &known, unchanged(7, 1)),
            Some(38)
        );
        // An answer of "unchanged" at another version or origin is not taken.
        assert_eq!(totals.settle(&filter(2010), &known, unchanged(7, 2)), None);
        assert_eq!(totals.settle(&filter(2010), &known, unchanged(8, 1)), None);
        let nothing = totals.known(&filter(2011), None);
        assert_eq!(
            totals.settle(&filter(2011), &nothing, unchanged(8, 1)),
            None
        );
        // A new count replaces the old.
        assert_eq!(
            totals.settle(&filter(2010), &known, counted(9, 1, 39)),
            Some(39)
        );
        assert_eq!(
            totals.known(&filter(2010), None).counted,
            Some(counted(9, 1, 39))
        );
    }

    #[test]
    fn a_count_that_went_backwards_forgets_every_total() {
        let totals = Totals::default();
        assert_eq!(read(&totals, 2010, 50, 38), Some(38));
        assert_eq!(read(&totals, 2010, 50, 0), Some(38), "kept");
        totals.seen(100);
        // A backup restored to 40, then writes back to 50: the first read of the filter
        // sees 50 below 100 and counts.
        assert_eq!(read(&totals, 2010, 50, 41), Some(41));
        assert_eq!(read(&totals, 2010, 50, 0), Some(41), "kept again");
    }

    #[test]
    fn a_count_sent_before_the_store_forgot_is_not_kept() {
        let totals = Totals::default();
        totals.seen(10);
        let before = totals.known(&filter(2010), None);
        totals.seen(5);
        // Sent before the restore, answered after: given, not kept.
        assert_eq!(
            totals.settle(&filter(2010), &before, counted(10, 1, 38)),
            Some(38)
        );
        assert_eq!(totals.known(&filter(2010), None).counted, None);
    }

    #[test]
    fn past_its_bound_the_store_forgets_and_counts_again() {
        let totals = Totals::default();
        for year in 0..KEPT as i32 {
            assert_eq!(read(&totals, year, 1, 1), Some(1));
        }
        assert_eq!(read(&totals, 0, 2, 2), Some(2));
        assert!(totals.known(&filter(1), None).counted.is_some());
        assert_eq!(read(&totals, -1, 2, 1), Some(1));
        assert_eq!(totals.known(&filter(1), None).counted, None);
        assert!(totals.known(&filter(-1), None).counted.is_some());
    }

    #[test]
    fn a_page_starts_from_the_nearest_mark_of_its_totals_version() {
        let totals = Totals::default();
        assert_eq!(read(&totals, 2010, 7, 38), Some(38));
        let at = |version| counted(version, 1, 38);
        // Page 3 of 10 (offset 20) held ids 40..=49.
        let known = totals.known(&filter(2010), None);
        totals.mark(
            &filter(2010),
            &known,
            at(7),
            Mark::of_page(20, &[40, 45, 49]),
        );
        let seek = |offset| totals.known(&filter(2010), Some((offset, 10))).seek;
        assert_eq!(seek(20), Some(Mark { before: 20, id: 40 }));
        assert_eq!(seek(23), Some(Mark { before: 23, id: 50 }));
        assert_eq!(seek(90), Some(Mark { before: 23, id: 50 }));
        assert_eq!(seek(19), None, "no mark below it");
        assert_eq!(totals.known(&filter(2010), None).seek, None);
        // Marks of another version are not kept, and a new count drops the old ones.
        totals.mark(&filter(2010), &known, at(8), Mark::of_page(60, &[90]));
        assert_eq!(seek(90), Some(Mark { before: 23, id: 50 }));
        assert_eq!(read(&totals, 2010, 8, 39), Some(39));
        assert_eq!(seek(90), None);
        assert_eq!(
            totals.known(&filter(2010), Some((90, 10))).counting().seek,
            None
        );
        // Past its bound, the oldest goes.
        let known = totals.known(&filter(2010), None);
        for page in 0..=MARKS as u64 {
            let marks = Mark::of_page(page * 10 + 10, &[page as i64]);
            totals.mark(&filter(2010), &known, at(8), marks);
        }
        assert_eq!(seek(10), None);
        assert_eq!(seek(90), Some(Mark { before: 90, id: 8 }));
        // Nor those read before the store forgot its totals.
        assert_eq!(read(&totals, 2010, 9, 40), Some(40));
        let before = totals.known(&filter(2010), None);
        totals.seen(1);
        assert_eq!(read(&totals, 2010, 9, 40), Some(40));
        totals.mark(&filter(2010), &before, at(9), Mark::of_page(20, &[40]));
        assert_eq!(seek(30), None);
        // A first page's first book skips nothing.
        assert_eq!(Mark::of_page(0, &[5, 7]), [Mark { before: 2, id: 8 }]);
    }

    #[test]
    fn a_filter_of_few_books_has_its_ids_kept_at_its_version() {
        let totals = Totals::default();
        let page = |offset| Some((offset, 2));
        assert!(!totals.known(&filter(2010), page(0)).listable, "no total");
        assert_eq!(read(&totals, 2010, 7, 3), Some(3));
        let known = totals.known(&filter(2010), page(0));
        assert!(known.listable && known.listed.is_none());
        assert!(
            !totals.known(&filter(2010), None).listable,
            "not in id order"
        );
        // Read at the kept version: kept, and pages are their slices.
        totals.list(&filter(2010), &known, counted(7, 1, 3), vec![4, 9, 12]);
        let listed = |offset| totals.known(&filter(2010), page(offset)).listed;
        assert_eq!(listed(0), Some(vec![4, 9]));
        assert_eq!(listed(2), Some(vec![12]));
        assert_eq!(listed(5), Some(vec![]), "past the last book");
        assert!(!totals.known(&filter(2010), page(0)).listable);
        assert_eq!(totals.known(&filter(2010), page(0)).counting().listed, None);
        // A count at the same version keeps them; at another, drops them.
        assert_eq!(read(&totals, 2010, 7, 3), Some(3));
        assert_eq!(listed(2), Some(vec![12]));
        assert_eq!(read(&totals, 2010, 8, 2), Some(2));
        assert_eq!(listed(0), None);
        // Read at a newer version, they are its total.
        let known = totals.known(&filter(2010), page(0));
        totals.list(&filter(2010), &known, counted(9, 1, 0), vec![4, 12]);
        assert_eq!(
            totals.known(&filter(2010), None).counted,
            Some(counted(9, 1, 2))
        );
        assert_eq!(listed(0), Some(vec![4, 12]));
        // Nor too many, nor read before the store forgot its totals.
        let known = totals.known(&filter(2011), page(0));
        totals.list(&filter(2011), &known, counted(9, 1, 0), vec![1; LISTED + 1]);
        assert_eq!(totals.known(&filter(2011), page(0)).listed, None);
        totals.seen(1);
        totals.list(&filter(2010), &known, counted(9, 1, 0), vec![4]);
        assert_eq!(listed(0), None);
        // Past the bound over every filter, the store drops every filter's ids.
        let known = totals.known(&filter(0), None);
        let every = LISTED_IN_ALL / LISTED;
        for year in 0..=every as i32 {
            totals.list(&filter(year), &known, counted(9, 1, 0), vec![1; LISTED]);
        }
        let listed = |year| totals.known(&filter(year), page(0)).listed;
        assert_eq!(listed(0), None);
        assert_eq!(listed(every as i32), Some(vec![1, 1]));
        assert_eq!(totals.state().listed, LISTED);
    }
}
