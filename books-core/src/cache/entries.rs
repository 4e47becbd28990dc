//! The cache's entries: the version they belong to, how it was seen, this process's
//! writes, and the answers and compressed bodies kept (one bounded map for both).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ETAG, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

use super::bounded::BoundedMap;
use super::{Key, PageRows, Reading, Rendered, copy};
use crate::conditional;
use crate::config::CacheLimits;
use crate::etag;
use crate::request_id::REQUEST_ID;
use crate::store::BooksTally;

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

/// How the entries' version was learnt.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// From a read's data: nothing says what the books were.
    ByRead,
    /// From a version check, with the books' tally when the store keeps one.
    ByCheck(Option<BooksTally>),
}

/// What the cache has for a key at a version.
pub(super) enum Found {
    /// The kept answer (or its 304).
    Hit(Response<Bytes>),
    /// A kept page's rows, to render under the total (at the version) given.
    Rows(Arc<PageRows>, u64, u64),
    Miss,
}

#[derive(Debug)]
pub(super) struct Entries {
    /// The version every kept answer belongs to.
    version: u64,
    seen: Seen,
    /// How many writes this process made, ever: a read that started before one keeps
    /// nothing (its version may be older than the write's).
    writes: u64,
    /// `writes` when a check (or a read that started after them) last confirmed
    /// `version`: below `writes`, a version the store knows without asking (pushed) may
    /// not know of this process's latest write yet, and is not trusted.
    confirmed: u64,
    /// Whether an answer was kept since the entries last moved to a new version (one may
    /// have been dropped for room since).
    answers_kept: bool,
    map: BoundedMap<Slot, Entry>,
}

impl Entries {
    pub(super) fn new(limits: CacheLimits) -> Self {
        Self {
            version: 0,
            seen: Seen::ByRead,
            writes: 0,
            confirmed: 0,
            answers_kept: false,
            map: BoundedMap::new(limits),
        }
    }

    /// The mark a read that starts now hands to [`put`](Self::put).
    pub(super) fn mark(&self) -> u64 {
        self.writes
    }

    /// Whether an answer for `key` is kept (at the newest version seen, which may be
    /// stale: only a check can tell).
    pub(super) fn holds(&self, key: &Key) -> bool {
        self.map.contains_key(&Slot::Answer(key.clone()))
    }

    /// `known` (the store's version without a round trip), if the cache may trust it: it
    /// is the entries' version, a check read that version too (its tally lets the next
    /// write keep pages), and no write of this process came since a confirmation.
    pub(super) fn trusted(&self, known: Option<u64>) -> Option<u64> {
        known.filter(|known| {
            *known == self.version
                && matches!(self.seen, Seen::ByCheck(_))
                && self.confirmed == self.writes
        })
    }

    fn tally(&self) -> Option<BooksTally> {
        match self.seen {
            Seen::ByCheck(tally) => tally,
            Seen::ByRead => None,
        }
    }

    /// The id a check's tally should count above: the greatest id at the entries'
    /// version, or `i64::MAX` when unknown.
    pub(super) fn tally_above(&self) -> i64 {
        self.tally().map_or(i64::MAX, |tally| tally.max_id)
    }

    /// Whether `version` is newer than the entries' while they keep answers a check
    /// could carry over to it (only appends since).
    pub(super) fn behind(&self, version: u64) -> bool {
        version > self.version && self.tally().is_some() && self.answers_kept
    }

    /// A write of this process: reads that started before it keep nothing, and a known
    /// version is not trusted until a check confirms one.
    pub(super) fn wrote(&mut self) {
        self.writes += 1;
    }

    /// Takes in a check's reading, sent when this process had made `writes` writes.
    pub(super) fn checked_at(&mut self, reading: Reading, writes: u64) {
        if reading.version > self.version {
            self.advance(reading);
        } else if reading.version == self.version && matches!(self.seen, Seen::ByRead) {
            self.seen = Seen::ByCheck(reading.tally);
        }
        if reading.version >= self.version && writes == self.writes {
            self.confirmed = writes;
        }
    }

    /// Moves to a newer reading: keeps what only appends since the entries' tally leave
    /// as it was (books, and full pages at or below the old greatest id), or no answer.
    fn advance(&mut self, reading: Reading) {
        let appended = match (self.tally(), reading.tally) {
            (Some(before), Some(now)) if now.only_appended_since(&before) => Some(before.max_id),
            _ => None,
        };
        self.version = reading.version;
        self.seen = Seen::ByCheck(reading.tally);
        self.map
            .retain(|slot, entry| match (slot, entry, appended) {
                (Slot::Encoded(..), _, _) => true,
                (_, _, None) => false,
                (Slot::Answer(Key::Book { .. }), _, _) => true,
                (Slot::Answer(Key::List { .. }), Entry::Answer(kept), Some(appended)) => {
                    kept.rows.as_ref().is_some_and(|rows| {
                        rows.full && rows.books.last().is_some_and(|b| b.id <= appended)
                    })
                }
                (Slot::Answer(_), Entry::Encoded(_), _) => false,
            });
        self.answers_kept &= appended.is_some();
    }

    /// The answer kept for `key` at `version`, if any; its 304 when `request`'s
    /// `If-None-Match` names the answer's tag; a page's rows when its total moved.
    pub(super) fn find(&self, key: &Key, version: u64, request: &HeaderMap) -> Found {
        let kept = match (version == self.version)
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
            return Found::Rows(rows.clone(), tally.total, version);
        }
        Found::Hit(match &kept.not_modified {
            Some((tag, not_modified)) if etag::none_match_names(request, tag.as_bytes()) => {
                copy(not_modified)
            }
            _ => copy(&kept.answer),
        })
    }

    /// Keeps `rendered` for `key`, read at `version` (in the same snapshot, or later) by
    /// a read that took `mark` before it started; nothing if this process wrote meanwhile
    /// or the entries moved past `version`.
    pub(super) fn put(&mut self, key: Key, version: u64, mark: u64, rendered: &Rendered) {
        if version < self.version || mark != self.writes {
            return;
        }
        if version > self.version {
            self.version = version;
            self.seen = Seen::ByRead;
            self.map.retain(|slot, _| matches!(slot, Slot::Encoded(..)));
            self.answers_kept = false;
        }
        // Read after this process's last write, at the entries' version: it is current.
        self.confirmed = self.writes;
        let mut answer = copy(&rendered.answer);
        answer
            .headers_mut()
            .insert(REQUEST_ID, HeaderValue::from_static(""));
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

    /// Keeps `body`, the identity `tag`'s bytes in `coding`.
    pub(super) fn keep_encoded(&mut self, tag: HeaderValue, coding: &'static str, body: Bytes) {
        let size = body.len();
        self.map
            .insert(Slot::Encoded(tag, coding), Entry::Encoded(body), size);
    }
}

#[cfg(test)]
mod tests;
