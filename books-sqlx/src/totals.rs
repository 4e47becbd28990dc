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
//! version instead of its count: its pages are then its books by id. A page whose
//! statement finds the version moved has them read again.
//!
//! The server ([`origin_sql`]) is what the version check's history guards against, read
//! where a replica can read it too: a count is a state only on the server and counter
//! table it was read from (a promoted standby, a restored backup or another node may
//! reach the same count with other books). And as the API drops its cache when a count
//! goes backwards (a backup restored into the same tables), a store that reads a count
//! lower than one it read before forgets every total.
//!
//! One module of some 400 lines: a total, its marks and its ids are one filter's entry,
//! kept, replaced and forgotten together under one lock; split, each part would reach
//! into the others' bookkeeping. Its tests are in `totals/tests.rs`.

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
/// then read by id).
pub(crate) const LISTED: usize = 4096;

/// How many ids a store keeps over every filter (2 MB): past it, it drops them all.
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
    /// Whether its ids may be read: not at the version the store dropped every
    /// filter's at (past [`LISTED_IN_ALL`]).
    listable: bool,
    /// Whether a request is reading its ids ([`Totals::claim`]).
    reading: bool,
}

/// The last total of each filter (`F`) a store counted, shared by its clones, and the
/// most books a filter may keep for their ids to be kept.
#[derive(Debug)]
pub(crate) struct Totals<F> {
    state: Mutex<State<F>>,
    most: usize,
}

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
    /// Whether the filter keeps few enough books for their ids to be kept, and they are
    /// not.
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
        Self::listing(LISTED)
    }
}

impl<F> Totals<F> {
    /// None kept, the ids of a filter kept if it keeps at most `most` books
    /// ([`LISTED`] at most).
    pub(crate) fn listing(most: usize) -> Self {
        let state = State {
            kept: HashMap::new(),
            highest: 0,
            forgotten: 0,
            listed: 0,
        };
        Self {
            state: Mutex::new(state),
            most: most.min(LISTED),
        }
    }

    /// The most books a filter may keep for their ids to be kept.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn most_listed(&self) -> usize {
        self.most
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
        let (mut marks, mut kept_ids, mut listable) = (Vec::new(), None, true);
        let mut reading = false;
        if let Some(kept) = self.kept.remove(filter) {
            self.listed -= kept.ids.as_ref().map_or(0, Vec::len);
            // Still being read whatever the version: its claim gives it up.
            reading = kept.reading;
            // Marks and ids stand while the version does.
            if (kept.counted.version, kept.counted.origin) == (counted.version, counted.origin) {
                (marks, kept_ids, listable) = (kept.marks, kept.ids, kept.listable);
            }
        }
        let ids = ids.or(kept_ids);
        self.listed += ids.as_ref().map_or(0, Vec::len);
        let kept = Kept {
            counted,
            marks,
            ids,
            listable,
            reading,
        };
        self.kept.insert(filter.clone(), kept);
    }
}

impl<F: Hash + Eq + Clone> Totals<F> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<F>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
                let few = (0..=self.most as i64).contains(&kept.counted.total);
                listable = kept.listable && self.most > 0 && few;
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

    /// The right to read `filter`'s ids, if no other request is reading them (the
    /// others count, as before their ids were kept, instead of reading them all at once
    /// after a write); given up when dropped, the read done or abandoned.
    pub(crate) fn claim<'a>(&'a self, filter: &'a F) -> Option<Claim<'a, F>> {
        let mut state = self.state();
        let kept = state.kept.get_mut(filter)?;
        if std::mem::replace(&mut kept.reading, true) {
            return None;
        }
        drop(state);
        Some(Claim {
            totals: self,
            filter,
        })
    }

    /// Keeps `ids`, every book of `filter`'s in id order, read at a version and origin
    /// by a statement sent with `known`, and their number as its total, unless the store
    /// forgot its totals since or they are too many.
    pub(crate) fn list(
        &self,
        filter: &F,
        known: &Known,
        (version, origin): (i64, i64),
        ids: Vec<i64>,
    ) {
        let mut state = self.state();
        state.see(version);
        if state.forgotten != known.forgotten || ids.len() > self.most || self.most == 0 {
            return;
        }
        let own = state.kept.get(filter).and_then(|kept| kept.ids.as_ref());
        if state.listed - own.map_or(0, Vec::len) + ids.len() > LISTED_IN_ALL {
            // Read again at their next versions only.
            for kept in state.kept.values_mut() {
                (kept.ids, kept.listable) = (None, false);
            }
            state.listed = 0;
        }
        let total = ids.len() as i64;
        let counted = Counted {
            version,
            origin,
            total,
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

/// A request's right to read a filter's ids ([`Totals::claim`]).
pub(crate) struct Claim<'a, F: Hash + Eq + Clone> {
    totals: &'a Totals<F>,
    filter: &'a F,
}

impl<F: Hash + Eq + Clone> Drop for Claim<'_, F> {
    fn drop(&mut self) {
        if let Some(kept) = self.totals.state().kept.get_mut(self.filter) {
            kept.reading = false;
        }
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
mod tests;
