//! Rendered book and page answers, reused while the store's version holds: the read
//! path's whole cache protocol behind one call ([`read_through`]).
//!
//! The parts, one concern each: this module (the read-through: key, render, keep, 304),
//! [`SharedCheck`] in the store module (one version check shared by the requests that
//! arrive together), [`entries`] (the cache's state and its transitions) and [`bounded`]
//! (the map with byte accounting that the answers and the compressed bodies share). The
//! cache keeps answers only for a store with the [versions tier](crate::store::Versions);
//! for any other store it keeps compressed bodies alone.
//!
//! # Invariants
//!
//! 1. **Exact.** A kept answer is served only when a version read *after its request
//!    arrived* has the count the answer was read at: a check sent after the request
//!    (shared with every request that arrived before it was sent), or the version the
//!    store knows without asking when it may be trusted (4). So no read returns data
//!    older than a write acknowledged before it began, whichever process wrote.
//!    Tests: `store::shared_check::tests::checks_are_shared_but_never_older_than_the_caller`,
//!    `tests::a_write_from_elsewhere_is_seen_by_the_next_read`, the conformance suite's
//!    `versions` tier (`cached_reads_see_writes_from_outside`).
//! 2. **Kept under the count it was read at**: the store returns the count with the
//!    data (same snapshot, or read before it), and the answer is kept under exactly that
//!    count; an older count than the standing's keeps nothing. Test:
//!    `entries::tests::a_read_older_than_our_write_keeps_nothing`.
//! 3. **Our writes.** A read that started before a write of this process keeps nothing
//!    (its version may predate the write). Test: the same.
//! 4. **A known version** (pushed by the database) is trusted only once a check has read
//!    the entries' version since this process's last write. Test:
//!    `entries::tests::a_known_version_is_trusted_again_only_after_our_write_is_seen`.
//! 5. **A check that fails** hands its error to its waiters alone; the next request sends
//!    a new one. Tests: `store::shared_check::tests::a_check_that_panics_fails_its_wave_only`,
//!    `a_failed_check_fails_its_callers_and_the_next_is_sent`.
//! 6. **Appends.** When a check finds a newer version, every answer goes, unless the
//!    store's tally ([`BooksTally`](crate::store::BooksTally)) shows that books were only
//!    appended above the old greatest id: then books stay, and full pages that end at or
//!    below it keep their rows, whose `meta` and `links` are rendered again from the new
//!    total on their next hit (new bytes, so a new `ETag`). A create, from this process
//!    or any other, thus costs the cache the last page, not every page. Test:
//!    `entries::tests::appends_keep_books_and_full_pages`.
//! 7. **Bounded.** Answers and compressed bodies together stay within [`CacheLimits`]
//!    (entries and body bytes); a body larger than the byte bound is not kept and drops
//!    nothing; a key kept again replaces its old value, bytes included. Room is made by
//!    dropping arbitrary entries (not the least recently used: the cheapest to find).
//!    Tests: `bounded::tests::*`, `entries::tests::answers_and_compressed_bodies_share_one_bound`.
//! 8. **Rewritten history.** A check that reads another [history](crate::store::Version)
//!    than the last check, or a count below the one the cache stood at when the check
//!    was sent (a failover, a restored backup, a database created again), drops every
//!    answer before any is served again, logged at `WARN` with what was seen and counted
//!    in [`CACHE_REWRITES`](crate::metrics::CACHE_REWRITES) by it (`seen="history"`,
//!    `seen="count"`). Tests:
//!    `entries::tests::a_rewritten_history_drops_every_answer`,
//!    `tests::a_rewound_database_is_never_served_from_the_cache`.

mod bounded;
mod entries;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Response};

use self::entries::{Entries, Found, Moved, Rewrite};
use crate::config::CacheLimits;
use crate::metrics::store_call;
use crate::store::{
    BookRecord, BooksTally, SharedCheck, StoreError, Version, VersionTally, Versions,
};
use tracing::Instrument as _;

/// Everything that shapes a cached answer (the configuration is the API's own).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    List {
        page: u64,
        author: bool,
        action: bool,
        xml: bool,
        /// A filtered or sorted list's `filter[…]` and `sort`, as its links carry them.
        query: Option<Arc<str>>,
    },
    Book {
        id: i64,
        author: bool,
        xml: bool,
    },
}

/// A page's rows as read, kept so its answer can be rendered again for a new total.
#[derive(Debug)]
pub(crate) struct PageRows {
    /// The books on the page.
    pub(crate) books: Vec<BookRecord>,
    /// Whether the page was full (a page that was not may gain rows from a create).
    pub(crate) full: bool,
    /// The total the answer shows.
    pub(crate) total: u64,
}

/// A rendered answer, the count its data was read at (when read through the versions
/// tier), and a page's rows.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) answer: Response<Bytes>,
    pub(crate) count: Option<u64>,
    pub(crate) rows: Option<Arc<PageRows>>,
}

/// What a render is asked for: a fresh read, or a kept page's rows under a new total.
#[derive(Debug)]
pub(crate) enum Source {
    Read,
    Rows(Arc<PageRows>, u64),
}

/// A version check's reading: the version, and the books' tally when the store keeps one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) version: Version,
    pub(crate) tally: Option<BooksTally>,
}

/// How the cache reads the store's version: the versions tier, with its tally if the
/// store keeps one.
#[derive(Clone)]
pub(crate) struct VersionSource {
    pub(crate) versions: Arc<dyn Versions>,
    pub(crate) tally: Option<Arc<dyn VersionTally>>,
}

/// The cache of one API: its entries and its shared version check.
pub(crate) struct Cache {
    entries: Arc<Mutex<Entries>>,
    checks: SharedCheck<Reading>,
    /// Where versions come from, when rendered answers are kept (the store has the
    /// versions tier).
    source: Option<VersionSource>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("keeps_answers", &self.source.is_some())
            .finish_non_exhaustive()
    }
}

fn lock(entries: &Mutex<Entries>) -> MutexGuard<'_, Entries> {
    entries.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cache {
    /// A cache within `limits`; it keeps rendered answers only for a store with versions
    /// (`source`).
    pub(crate) fn new(limits: CacheLimits, source: Option<VersionSource>) -> Self {
        Self {
            entries: Arc::new(Mutex::new(Entries::new(limits))),
            checks: SharedCheck::new(),
            source,
        }
    }

    /// The versions tier, when rendered answers are kept: reads then go through it.
    pub(crate) fn versions(&self) -> Option<&dyn Versions> {
        self.source.as_ref().map(|source| &*source.versions)
    }

    /// Marks every answer as possibly older than a write this process just made: the
    /// next lookups check the store's version, and reads that started before keep
    /// nothing. Nothing is dropped here: the check decides what the write changed.
    pub(crate) fn wrote(&self) {
        lock(&self.entries).wrote();
    }

    /// The body kept for the identity `tag` in `coding`.
    pub(crate) fn encoded(&self, tag: &HeaderValue, coding: &'static str) -> Option<Bytes> {
        lock(&self.entries).encoded(tag, coding)
    }

    /// Keeps `body`, the identity `tag`'s bytes in `coding`.
    pub(crate) fn keep_encoded(&self, tag: HeaderValue, coding: &'static str, body: Bytes) {
        lock(&self.entries).keep_encoded(tag, coding, body);
    }

    /// The store's version from a check sent after this call (shared with every caller
    /// that joins before it is sent), the entries moved on to it.
    ///
    /// In a `version_check` span (`crate::trace`) that says whether the check was
    /// shared; the query runs under the span of the request that sent it.
    async fn check(&self, source: &VersionSource) -> Result<Reading, Arc<StoreError>> {
        let span = tracing::debug_span!(
            "version_check",
            books.version_check.shared = tracing::field::Empty
        );
        let mut sent = false;
        let read = self.checks.read(|| {
            sent = true;
            let (entries, source) = (self.entries.clone(), source.clone());
            let parent = span.clone();
            async move {
                // Sent from here on: a write this process finishes later is not in it.
                let (above, mark) = {
                    let entries = lock(&entries);
                    (entries.tally_above(), entries.mark())
                };
                let reading = read_version(&source, above).await?;
                if let Moved::Rewritten(rewrite) = lock(&entries).checked(reading, mark) {
                    dropped(rewrite, reading.version);
                }
                Ok(reading)
            }
            .instrument(parent)
        });
        // A span no subscriber wants is not entered around every poll.
        let reading = if span.is_disabled() {
            read.await
        } else {
            read.instrument(span.clone()).await
        };
        if !span.is_disabled() {
            span.record("books.version_check.shared", !sent);
        }
        reading
    }
}

/// Logs and counts a drop of every answer, saying what the check saw, and no more.
fn dropped(rewrite: Rewrite, now: Version) {
    crate::metrics::cache_rewritten(match rewrite {
        Rewrite::History { .. } => "history",
        Rewrite::Backwards { .. } => "count",
    });
    match rewrite {
        Rewrite::History { was } => tracing::warn!(
            history = now.history,
            was,
            count = now.count,
            "every cached answer dropped: the store's version names another history \
             (a promoted standby's new timeline, another server, a restored backup or a \
             database created again; whether writes were lost it does not say)"
        ),
        Rewrite::Backwards { was } => tracing::warn!(
            count = now.count,
            was,
            history = now.history,
            "every cached answer dropped: the store's version count went back (writes \
             this process had seen are gone: a failover that lost them, a restored backup)"
        ),
    }
}

/// One version query: the tally with it when the store keeps one.
async fn read_version(source: &VersionSource, above: i64) -> Result<Reading, StoreError> {
    if let Some(tally) = &source.tally {
        let (version, tally) = store_call("version", tally.tallied_version(above)).await?;
        return Ok(Reading {
            version,
            tally: Some(tally),
        });
    }
    let version = store_call("version", source.versions.version()).await?;
    Ok(Reading {
        version,
        tally: None,
    })
}

/// The answer for `key`: the cached one if a version check sent after this call (or the
/// version the store knows) finds it current, its 304 when `request`'s `If-None-Match`
/// names its tag; else `render`'s, kept under the count it was read at. Without a cache
/// of answers, `render`'s.
///
/// The entries are locked four times, each a transition or a look that the await before
/// it cannot make stale: the look-up (and the mark the read starts at), the find after
/// the check, and keeping a render (after a check of its own when it read a newer count
/// while answers a check could carry over are kept).
///
/// `render` runs boxed, only on a miss or to re-render a kept page: a hit's future stays
/// small enough for the allocator's fast path when a binding boxes it (BENCHMARKS.md,
/// "Instructions per answer").
pub(crate) async fn read_through<F, E>(
    cache: Option<&Cache>,
    key: Key,
    request: &HeaderMap,
    render: impl FnOnce(Source) -> F,
) -> Result<Response<Bytes>, E>
where
    F: Future<Output = Result<Rendered, E>>,
    E: From<Arc<StoreError>>,
{
    let Some((cache, source)) = cache.and_then(|c| c.source.as_ref().map(|s| (c, s))) else {
        return Box::pin(render(Source::Read)).await.map(|r| r.answer);
    };
    let known = source.versions.known_version();
    let (held, trusted, mark) = {
        let entries = lock(&cache.entries);
        (entries.holds(&key), entries.trusted(known), entries.mark())
    };
    if held {
        let count = match trusted {
            Some(count) => count,
            None => cache.check(source).await?.version.count,
        };
        let found = lock(&cache.entries).find(&key, count, request);
        match found {
            Found::Hit(hit) => {
                crate::trace::cache_hit();
                return Ok(hit);
            }
            Found::Rows(rows, total, learnt) => {
                let rendered = Box::pin(render(Source::Rows(rows, total))).await?;
                lock(&cache.entries).renew(key, learnt, &rendered);
                return Ok(rendered.answer);
            }
            Found::Miss => {}
        }
    } else {
        crate::metrics::cache(false);
    }
    let rendered = Box::pin(render(Source::Read)).await?;
    if let Some(count) = rendered.count {
        if lock(&cache.entries).behind(count) {
            // A newer count than the standing's: a check tells whether the kept answers
            // survive it (only appends) before this one renews them. Its failure costs
            // the cache nothing but its entries.
            let _ = cache.check(source).await;
        }
        lock(&cache.entries).put(key, count, mark, &rendered);
    }
    Ok(rendered.answer)
}

/// A copy of `answer` (its request id slot included: see `entries::Kept`).
pub(crate) fn copy(answer: &Response<Bytes>) -> Response<Bytes> {
    let mut response = Response::new(answer.body().clone());
    *response.status_mut() = answer.status();
    *response.headers_mut() = answer.headers().clone();
    response
}
