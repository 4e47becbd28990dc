//! The cache's state: what its answers stand for ([`Standing`]), this process's writes,
//! and the answers and compressed bodies kept (one bounded map for both), changed only
//! through the transitions named here: [`wrote`](Entries::wrote),
//! [`checked`](Entries::checked), [`put`](Entries::put), [`renew`](Entries::renew) and
//! [`keep_encoded`](Entries::keep_encoded).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ETAG, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

use super::bounded::BoundedMap;
use super::{Key, PageRows, Reading, Rendered, copy};
use crate::conditional;
use crate::config::CacheLimits;
use crate::etag;
use crate::stamp;
use crate::store::{BooksTally, Version};

/// What the map holds under a key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Slot {
    /// A rendered answer, kept while the version holds.
    Answer(Key),
    /// A compressed body, kept by the identity `ETag` it was made from and its coding:
    /// a hash of the identity bytes, so it never goes stale and survives new versions.
    Encoded(HeaderValue, &'static str),
}

#[derive(Debug)]
enum Entry {
    Answer(Box<Kept>),
    Encoded(Bytes),
}

/// One cached answer, and the 304 that stands for it when it has an `ETag` (made once
/// here rather than from a copy of the answer on every conditional hit). Both carry an
/// empty `X-Request-Id` that each copy's own id replaces (the API sets it on every
/// answer), so a copy is a plain clone whose header list never grows.
#[derive(Debug)]
struct Kept {
    answer: Response<Bytes>,
    /// The answer's `ETag` and its 304.
    not_modified: Option<(HeaderValue, Response<Bytes>)>,
    /// A page's rows.
    rows: Option<Arc<PageRows>>,
}

/// The count every kept answer was read at, and how the cache learnt it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// From a read's data: nothing says which history, nor what the books were.
    Read(u64),
    /// From a version check, with the books' tally when the store keeps one.
    Checked(Reading),
}

impl Standing {
    fn count(&self) -> u64 {
        match self {
            Self::Read(count) => *count,
            Self::Checked(reading) => reading.version.count,
        }
    }
}

/// What the cache has for a key at a count.
pub(super) enum Found {
    /// The kept answer (or its 304).
    Hit(Response<Bytes>),
    /// A kept page's rows, to render under the total given, found at the standing the
    /// last number names ([`renew`](Entries::renew)).
    Rows(Arc<PageRows>, u64, u64),
    Miss,
}

/// What a check found, against what the cache stood for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Moved {
    /// The same data (or older than what a read since found).
    No,
    /// A newer count in the same history: answers went, unless only appends came.
    Ahead,
    /// Another history than the last check's, or a count below the standing the cache
    /// had when the check was sent: the database's history may have been rewritten, and
    /// every answer went.
    Rewritten(Rewrite),
}

/// What a check saw that dropped every answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rewrite {
    /// The version names another history than the last check's (`was`): a promoted
    /// standby, another server, a restored backup, a database created again. Whether
    /// writes were lost the database does not say.
    History { was: u64 },
    /// The count went back from `was` to the check's: writes the cache had seen are gone.
    Backwards { was: u64 },
}

/// Where a read or check starts: after how many writes of this process (a read that
/// started before a write keeps nothing: its data may predate the write), and after
/// which standing (a check sent after the cache learnt a count that answers a lower one
/// found the history rewritten).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    writes: u64,
    learnt: u64,
}

#[derive(Debug)]
pub(super) struct Entries {
    standing: Standing,
    /// How many times the standing changed, ever.
    learnt: u64,
    /// The history the last check read (reads do not say which).
    history: Option<u64>,
    /// How many writes this process made, ever.
    writes: u64,
    /// `writes` when a check (or a read that started after them) last confirmed the
    /// standing: below `writes`, a version the store knows without asking (pushed) may
    /// not know of this process's latest write yet, and is not trusted.
    confirmed: u64,
    /// Whether an answer was kept since the standing last moved (one may have been
    /// dropped for room since).
    answers_kept: bool,
    map: BoundedMap<Slot, Entry>,
}

impl Entries {
    pub(super) fn new(limits: CacheLimits) -> Self {
        Self {
            standing: Standing::Read(0),
            learnt: 0,
            history: None,
            writes: 0,
            confirmed: 0,
            answers_kept: false,
            map: BoundedMap::new(limits),
        }
    }

    /// The mark a read or check that starts now hands back when it ends.
    pub(super) fn mark(&self) -> Mark {
        Mark {
            writes: self.writes,
            learnt: self.learnt,
        }
    }

    fn stand(&mut self, standing: Standing) {
        self.standing = standing;
        self.learnt += 1;
    }

    /// Whether an answer for `key` is kept (at the newest count seen, which may be
    /// stale: only a check can tell).
    pub(super) fn holds(&self, key: &Key) -> bool {
        self.map.contains_key(&Slot::Answer(key.clone()))
    }

    /// The count of `known` (the store's version without a round trip), if the cache may
    /// trust it: it is the standing a check read (its tally lets the next write keep
    /// pages), and no write of this process came since a confirmation.
    pub(super) fn trusted(&self, known: Option<Version>) -> Option<u64> {
        let known = known?;
        let checked = matches!(self.standing, Standing::Checked(r) if r.version == known);
        (checked && self.confirmed == self.writes).then_some(known.count)
    }

    fn tally(&self) -> Option<BooksTally> {
        match self.standing {
            Standing::Checked(reading) => reading.tally,
            Standing::Read(_) => None,
        }
    }

    /// The id a check's tally should count above: the greatest id at the standing, or
    /// `i64::MAX` when unknown.
    pub(super) fn tally_above(&self) -> i64 {
        self.tally().map_or(i64::MAX, |tally| tally.max_id)
    }

    /// Whether a read found `count` newer than the standing while answers are kept that a
    /// check could carry over to it (only appends since).
    pub(super) fn behind(&self, count: u64) -> bool {
        count > self.standing.count() && self.tally().is_some() && self.answers_kept
    }

    /// Transition: a write of this process. Reads that started before it keep nothing,
    /// and a known version is not trusted until a check confirms one.
    pub(super) fn wrote(&mut self) {
        self.writes += 1;
    }

    /// Transition: a check's reading, sent at `mark`.
    pub(super) fn checked(&mut self, reading: Reading, mark: Mark) -> Moved {
        let count = reading.version.count;
        let other_history = self
            .history
            .replace(reading.version.history)
            .filter(|history| *history != reading.version.history);
        let backwards = count < self.standing.count() && mark.learnt == self.learnt;
        let rewrite = match other_history {
            Some(was) => Some(Rewrite::History { was }),
            None => backwards.then(|| Rewrite::Backwards {
                was: self.standing.count(),
            }),
        };
        let moved = if let Some(rewrite) = rewrite {
            self.forget_answers();
            self.stand(Standing::Checked(reading));
            Moved::Rewritten(rewrite)
        } else if count > self.standing.count() {
            self.advance(reading);
            Moved::Ahead
        } else {
            if count == self.standing.count() {
                self.stand(Standing::Checked(reading));
            }
            Moved::No
        };
        if count >= self.standing.count() && mark.writes == self.writes {
            self.confirmed = self.writes;
        }
        moved
    }

    /// Moves to a newer reading: keeps what only appends since the standing's tally leave
    /// as it was (books, and full pages at or below the old greatest id), or no answer.
    fn advance(&mut self, reading: Reading) {
        let appended = match (self.tally(), reading.tally) {
            (Some(before), Some(now)) if now.only_appended_since(&before) => Some(before.max_id),
            _ => None,
        };
        self.stand(Standing::Checked(reading));
        let Some(appended) = appended else {
            return self.forget_answers();
        };
        self.map.retain(|slot, entry| match (slot, entry) {
            (Slot::Encoded(..), _) | (Slot::Answer(Key::Book { .. }), _) => true,
            (Slot::Answer(Key::List { .. }), Entry::Answer(kept)) => {
                kept.rows.as_ref().is_some_and(|rows| {
                    rows.full && rows.books.last().is_some_and(|b| b.id <= appended)
                })
            }
            (Slot::Answer(_), Entry::Encoded(_)) => false,
        });
    }

    /// Drops every answer (compressed bodies stay: they are named by their bytes).
    fn forget_answers(&mut self) {
        self.map.retain(|slot, _| matches!(slot, Slot::Encoded(..)));
        self.answers_kept = false;
    }

    /// The answer kept for `key` at `count`, if any; its 304 when `request`'s
    /// `If-None-Match` names the answer's tag; a page's rows when its total moved.
    pub(super) fn find(&self, key: &Key, count: u64, request: &HeaderMap) -> Found {
        let kept = match (count == self.standing.count())
            .then(|| self.map.get(&Slot::Answer(key.clone())))
            .flatten()
        {
            Some(Entry::Answer(kept)) => Some(kept),
            _ => None,
        };
        crate::metrics::cache(kept.is_some());
        let Some(kept) = kept else {
            return Found::Miss;
        };
        if let (Some(rows), Some(tally)) = (&kept.rows, self.tally())
            && rows.total != tally.total
        {
            return Found::Rows(rows.clone(), tally.total, self.learnt);
        }
        Found::Hit(match &kept.not_modified {
            Some((tag, not_modified)) if etag::none_match_names(request, tag.as_bytes()) => {
                copy(not_modified)
            }
            _ => copy(&kept.answer),
        })
    }

    /// Transition: keeps `rendered` for `key`, read at `count` (in the same snapshot, or
    /// later) by a read that started at `mark`; nothing if this process wrote meanwhile
    /// or the standing moved past `count`. A newer count becomes the standing.
    pub(super) fn put(&mut self, key: Key, count: u64, mark: Mark, rendered: &Rendered) {
        if count < self.standing.count() || mark.writes != self.writes {
            return;
        }
        if count > self.standing.count() {
            self.stand(Standing::Read(count));
            self.forget_answers();
        }
        // Read after this process's last write, at the standing's count: it is current.
        self.confirmed = self.writes;
        self.keep(key, rendered);
    }

    /// Transition: keeps `rendered`, a kept page's rows rendered under the standing's
    /// total ([`Found::Rows`], found at standing `learnt`), while the standing is the one
    /// it was found at. Unlike [`put`](Self::put), whatever this process wrote meanwhile:
    /// nothing in it was read by the request (its rows were kept at the standing, its
    /// total is the standing's), so no write can have raced the read; and it confirms
    /// nothing. Refused after writes, as a read's answer is, every page asked while this
    /// process creates books was rendered again at each request (half of the cached
    /// pages of the mixed workload on PostgreSQL).
    pub(super) fn renew(&mut self, key: Key, learnt: u64, rendered: &Rendered) {
        if learnt == self.learnt {
            self.keep(key, rendered);
        }
    }

    /// `rendered` kept for `key`, with its 304.
    fn keep(&mut self, key: Key, rendered: &Rendered) {
        let mut answer = copy(&rendered.answer);
        stamp::keep_slots(answer.headers_mut(), None);
        let not_modified = (answer.status() == StatusCode::OK)
            .then(|| answer.headers().get(ETAG))
            .flatten()
            .map(|tag| {
                let mut not_modified = copy(&answer);
                conditional::make_not_modified(&mut not_modified);
                (tag.clone(), not_modified)
            });
        let size = answer.body().len();
        let kept = Kept {
            answer,
            not_modified,
            rows: rendered.rows.clone(),
        };
        if self
            .map
            .insert(Slot::Answer(key), Entry::Answer(Box::new(kept)), size)
        {
            self.answers_kept = true;
        }
    }

    /// The body kept for the identity `tag` in `coding`.
    pub(super) fn encoded(&self, tag: &HeaderValue, coding: &'static str) -> Option<Bytes> {
        match self.map.get(&Slot::Encoded(tag.clone(), coding)) {
            Some(Entry::Encoded(body)) => Some(body.clone()),
            _ => None,
        }
    }

    /// Transition: keeps `body`, the identity `tag`'s bytes in `coding`.
    pub(super) fn keep_encoded(&mut self, tag: HeaderValue, coding: &'static str, body: Bytes) {
        let size = body.len();
        self.map
            .insert(Slot::Encoded(tag, coding), Entry::Encoded(body), size);
    }
}

#[cfg(test)]
mod tests;
