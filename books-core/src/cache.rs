//! Rendered book and page answers, reused while the store's version holds: the whole
//! read path's cache protocol, behind one call ([`read_through`]).
//!
//! Exact: a read never returns data older than the last write acknowledged before the
//! read started, whichever process made it. Every cached answer is served only after a
//! version check *sent after its request arrived*; checks are shared, so under load one
//! check in flight (and the one queued behind it) answers for every request that
//! arrived before it was sent. A check waits before it is sent while the runtime keeps
//! reading requests that join it (under tokio: scheduler rounds, until two quiet ones,
//! [`MAX_ROUNDS`] or [`MAX_WAIT`]), so one check serves a whole wave of requests rather
//! than the first few: a few microseconds more latency alone, far fewer queries under
//! load (BENCHMARKS.md). Under tokio a check runs as a task of its own, so its rounds
//! poll only it and each waiting request is woken once; outside tokio every request
//! sends a check of its own. A key the cache does not hold skips the check and reads
//! at once: the store returns the version with the data, and the answer is kept under
//! it. A store that knows its version without asking ([`BookStore::known_version`]) is
//! trusted instead of a check, except right after a write of this process (a pushed
//! version may not know of it yet).
//!
//! Entries are kept for the newest version seen. When a check finds a newer one, they
//! go, unless the store's tally ([`BooksTally`]) shows the books were only appended to:
//! then answers for single books stay as they are, and pages that were full and end at
//! or below the old greatest id keep their rows, whose `meta` and `links` are rendered
//! again from the new total on their next hit (new bytes, so a new `ETag`). A create,
//! from this process or any other, thus costs the cache the last page, not every page.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ETAG, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

use crate::conditional;
use crate::metrics::store_call;
use crate::problem::Problem;
use crate::request_id::REQUEST_ID;
use crate::store::{BookRecord, BookStore, BooksTally, StoreError, VersionReading};

/// How much the cache of rendered answers may hold (see [`Config::with_cache`](crate::Config::with_cache)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most answers kept.
    pub entries: usize,
    /// Most body bytes kept.
    pub bytes: usize,
}

impl Default for CacheLimits {
    /// 1,024 answers and 16 MiB of bodies.
    fn default() -> Self {
        Self {
            entries: 1024,
            bytes: 16 * 1024 * 1024,
        }
    }
}

/// Everything that shapes a cached answer (the configuration is the API's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    List {
        page: u64,
        author: bool,
        action: bool,
        xml: bool,
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

/// A rendered answer, the store version its data was read at (if the store says), and
/// a page's rows.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) answer: Response<Bytes>,
    pub(crate) version: Option<u64>,
    pub(crate) rows: Option<Arc<PageRows>>,
}

/// What a render is asked for: a fresh read, or a kept page's rows under a new total.
#[derive(Debug)]
pub(crate) enum Source {
    Read,
    Rows(Arc<PageRows>, u64),
}

/// The answer for `key`: the cached one if a version check sent after this call (or the
/// version the store knows) finds it current, its 304 when `request`'s `If-None-Match`
/// names its tag; else `render`'s, kept under the version it was read at. Without a
/// cache, `render`'s.
///
/// `render` runs boxed, only on a miss or to re-render a kept page: a hit's future stays
/// small enough for the allocator's fast path when a binding boxes it (BENCHMARKS.md,
/// "304s").
pub(crate) async fn read_through<F>(
    cache: Option<&Cache>,
    store: &Arc<dyn BookStore>,
    key: Key,
    request: &HeaderMap,
    render: impl FnOnce(Source) -> F,
) -> Result<Response<Bytes>, Problem>
where
    F: Future<Output = Result<Rendered, Problem>>,
{
    let Some(cache) = cache else {
        return Box::pin(render(Source::Read)).await.map(|r| r.answer);
    };
    let look = cache.look(&key, store.known_version());
    if look.held {
        let found = match look.trusted {
            Some(version) => cache.find(&key, version, request),
            None => {
                let reading = cache.check(store).await.map_err(Problem::from_store)?;
                cache.find(&key, reading.version, request)
            }
        };
        match found {
            Found::Hit(hit) => return Ok(hit),
            Found::Rows(rows, total, version) => {
                let rendered = Box::pin(render(Source::Rows(rows, total))).await?;
                cache.put(key, version, look.mark, &rendered);
                return Ok(rendered.answer);
            }
            Found::Miss => {}
        }
    } else {
        crate::metrics::cache(false);
    }
    let rendered = Box::pin(render(Source::Read)).await?;
    if let Some(version) = rendered.version {
        if cache.behind(version) {
            // A newer version than the cache's: a check tells whether the kept answers
            // survive it (only appends) before this one renews the cache. Its failure
            // costs the cache nothing but its entries.
            let _ = cache.check(store).await;
        }
        cache.put(key, version, look.mark, &rendered);
    }
    Ok(rendered.answer)
}

/// Most scheduler rounds a check waits for requests to join it before it is sent.
const MAX_ROUNDS: u32 = 16;

/// Longest a check waits for requests to join it: rounds are short (each runs what
/// became ready since the last), but a busy runtime's can be long.
const MAX_WAIT: Duration = Duration::from_millis(1);

/// A check's reading (`None`: the store keeps no version).
type Reading = Result<Option<VersionReading>, Arc<StoreError>>;

/// One version check and the requests waiting for its reading: each waiter is woken
/// once, when the reading is in.
struct Wave(Mutex<WaveState>);

struct WaveState {
    reading: Option<Reading>,
    waiting: Vec<Waker>,
}

impl Wave {
    /// The reading, once the check is done.
    fn reading(self: Arc<Self>) -> impl Future<Output = Reading> {
        std::future::poll_fn(move |cx| {
            let mut state = lock(&self.0);
            match &state.reading {
                Some(reading) => Poll::Ready(reading.clone()),
                None => {
                    if !state.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                        state.waiting.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
    }

    /// Hands `reading` to every waiter.
    fn finish(&self, reading: Reading) {
        let waiting = {
            let mut state = lock(&self.0);
            state.reading = Some(reading);
            std::mem::take(&mut state.waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
    }
}

/// A check task's hold on its wave and its place in [`Checks`]. Dropped before the
/// reading is in (the task panicked, or its runtime shut down), it gives the place up and
/// hands the waiters an error, so no request waits forever and the next one starts anew.
struct Sending {
    wave: Arc<Wave>,
    checks: Arc<Mutex<Checks>>,
    id: u64,
}

impl Drop for Sending {
    fn drop(&mut self) {
        if lock(&self.wave.0).reading.is_some() {
            return;
        }
        {
            let checks = &mut *lock(&self.checks);
            for slot in [&mut checks.queued, &mut checks.running] {
                if slot.as_ref().is_some_and(|(id, _)| *id == self.id) {
                    *slot = None;
                }
            }
        }
        let error = StoreError::other("the version check ended without a reading");
        self.wave.finish(Err(Arc::new(error)));
    }
}

#[derive(Debug)]
pub(crate) struct Cache {
    limits: CacheLimits,
    entries: Arc<Mutex<Entries>>,
    checks: Arc<Mutex<Checks>>,
}

#[derive(Debug, Default)]
struct Entries {
    /// The version every entry belongs to.
    version: u64,
    /// Whether a check read `version` (rather than a read alone).
    checked: bool,
    /// The books' tally at `version`, when a check read one.
    tally: Option<BooksTally>,
    /// How many times this process wrote: a read that started before a write keeps
    /// nothing (its version may be older than the write's, which a pushed version may
    /// not know yet).
    writes: u64,
    /// Whether this process wrote since a check last confirmed `version`: the store's
    /// known version is not trusted until one does.
    unconfirmed: bool,
    map: HashMap<Key, Kept, foldhash::fast::RandomState>,
    bytes: usize,
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

/// What the cache has for a key at a version.
enum Found {
    Hit(Response<Bytes>),
    /// A kept page's rows, to render under the total (at the version) given.
    Rows(Arc<PageRows>, u64, u64),
    Miss,
}

/// What a lookup starts from.
struct Look {
    /// Whether an answer for the key is kept (at the newest version seen, which may be
    /// stale: only a check can tell).
    held: bool,
    /// The version to trust without a check, if any.
    trusted: Option<u64>,
    /// The mark a read that starts now hands to [`Cache::put`].
    mark: u64,
}

#[derive(Default)]
struct Checks {
    next_id: u64,
    /// The check in flight.
    running: Option<(u64, Arc<Wave>)>,
    /// The check not sent yet (it waits for `running`, then for the runtime to run
    /// what is ready); requests arriving meanwhile join it.
    queued: Option<(u64, Arc<Wave>)>,
    /// Requests that asked for a check, ever: whether a round brought new ones.
    joined: u64,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checks").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Entries {
    /// Empty, for `version` (with a check's tally, if a check read it).
    fn renew(&mut self, version: u64, checked: Option<Option<BooksTally>>) {
        self.version = version;
        self.checked = checked.is_some();
        self.tally = checked.flatten();
        self.map.clear();
        self.bytes = 0;
    }

    /// Takes in a check's reading, sent when this process had made `writes` writes.
    fn checked_at(&mut self, reading: VersionReading, writes: u64) {
        if reading.version > self.version {
            self.advance(reading);
        } else if reading.version == self.version && !self.checked {
            self.checked = true;
            self.tally = reading.books;
        }
        if reading.version >= self.version && writes == self.writes {
            self.unconfirmed = false;
        }
    }

    /// Moves to a newer reading: keeps what only appends since `self.tally` leave as it
    /// was (see the module's doc), or nothing.
    fn advance(&mut self, reading: VersionReading) {
        let appended = match (self.tally, reading.books) {
            (Some(before), Some(now)) if now.only_appended_since(&before) => before.max_id,
            _ => return self.renew(reading.version, Some(reading.books)),
        };
        self.version = reading.version;
        self.checked = true;
        self.tally = reading.books;
        let mut bytes = 0;
        self.map.retain(|key, kept| {
            let keep = match (key, &kept.rows) {
                (Key::Book { .. }, _) => true,
                (Key::List { .. }, Some(rows)) => {
                    rows.full && rows.books.last().is_some_and(|b| b.id <= appended)
                }
                (Key::List { .. }, None) => false,
            };
            if keep {
                bytes += kept.answer.body().len();
            }
            keep
        });
        self.bytes = bytes;
    }
}

impl Cache {
    pub(crate) fn new(limits: CacheLimits) -> Self {
        Self {
            limits,
            entries: Arc::default(),
            checks: Arc::default(),
        }
    }

    fn look(&self, key: &Key, known: Option<u64>) -> Look {
        let entries = lock(&self.entries);
        Look {
            held: entries.map.contains_key(key),
            // Once a check read the version too: its tally lets the next write keep pages.
            trusted: known.filter(|known| {
                *known == entries.version && entries.checked && !entries.unconfirmed
            }),
            mark: entries.writes,
        }
    }

    /// Whether `version` is newer than the cache's while it keeps answers that a check
    /// could carry over to it.
    fn behind(&self, version: u64) -> bool {
        let entries = lock(&self.entries);
        version > entries.version && entries.tally.is_some() && !entries.map.is_empty()
    }

    /// The store's version from a check sent after this call (shared with every caller
    /// that joins before it is sent), the cache moved on to it. A store without a
    /// version reads as version 0 with nothing kept under it.
    ///
    /// Under tokio the check runs as a task of its own, so its rounds of waiting for
    /// joiners poll only it, and each joiner is woken once; elsewhere each caller sends
    /// a check of its own.
    async fn check(&self, store: &Arc<dyn BookStore>) -> Result<VersionReading, Arc<StoreError>> {
        let reading = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => self.join(&runtime, store).reading().await,
            Err(_) => Self::send(&self.entries, store).await,
        };
        Ok(reading?.unwrap_or(VersionReading {
            version: 0,
            books: None,
        }))
    }

    /// The wave of the check not sent yet, started on `runtime` if there is none.
    fn join(&self, runtime: &tokio::runtime::Handle, store: &Arc<dyn BookStore>) -> Arc<Wave> {
        let mut checks = lock(&self.checks);
        checks.joined += 1;
        if let Some((_, queued)) = &checks.queued {
            return queued.clone();
        }
        checks.next_id += 1;
        let id = checks.next_id;
        // Room for a wave of 16 without growing (most are smaller).
        let wave = Arc::new(Wave(Mutex::new(WaveState {
            reading: None,
            waiting: Vec::with_capacity(16),
        })));
        let after = checks.running.as_ref().map(|(_, running)| running.clone());
        checks.queued = Some((id, wave.clone()));
        let sending = Sending {
            wave: wave.clone(),
            checks: self.checks.clone(),
            id,
        };
        runtime.spawn(Self::check_after(
            sending,
            self.entries.clone(),
            store.clone(),
            after,
        ));
        wave
    }

    /// One version query, sent once `after` (the check in flight) is done and the
    /// requests the runtime has already read had their turn to join; its reading goes
    /// to the wave's waiters.
    async fn check_after(
        sending: Sending,
        entries: Arc<Mutex<Entries>>,
        store: Arc<dyn BookStore>,
        after: Option<Arc<Wave>>,
    ) {
        let (checks, id) = (&sending.checks, sending.id);
        if let Some(after) = after {
            let _ = after.reading().await;
        }
        // Under tokio a yield resumes once every ready task ran and the I/O driver
        // was polled: wait while rounds bring new joiners (two at least: a resumed
        // task runs before those its round woke), up to `MAX_ROUNDS` and `MAX_WAIT`.
        let mut seen = lock(checks).joined;
        let mut quiet = 0;
        let waiting = Instant::now();
        for _ in 1..=MAX_ROUNDS {
            if waiting.elapsed() >= MAX_WAIT {
                break;
            }
            tokio::task::yield_now().await;
            let joined = lock(checks).joined;
            quiet = if joined == seen { quiet + 1 } else { 0 };
            if quiet == 2 {
                break;
            }
            seen = joined;
        }
        {
            let mut slots = lock(checks);
            if slots
                .queued
                .as_ref()
                .is_some_and(|(queued, _)| *queued == id)
            {
                slots.running = slots.queued.take();
            }
        }
        let reading = Self::send(&entries, &store).await;
        {
            let mut slots = lock(checks);
            if slots
                .running
                .as_ref()
                .is_some_and(|(running, _)| *running == id)
            {
                slots.running = None;
            }
        }
        sending.wave.finish(reading);
    }

    /// Sends one version query now and moves the entries on to its reading.
    async fn send(entries: &Mutex<Entries>, store: &Arc<dyn BookStore>) -> Reading {
        // Sent from here on: a write this process finishes later is not in it.
        let (above, writes) = {
            let entries = lock(entries);
            let above = entries.tally.map_or(i64::MAX, |tally| tally.max_id);
            (above, entries.writes)
        };
        let reading = store_call("version", store.check_version(above))
            .await
            .map_err(Arc::new);
        if let Ok(Some(reading)) = reading {
            lock(entries).checked_at(reading, writes);
        }
        reading
    }

    /// Marks every answer as possibly older than a write this process just made: the
    /// next lookups check the store's version, and reads that started before keep
    /// nothing. Nothing is dropped here: the check decides what the write changed.
    pub(crate) fn wrote(&self) {
        let mut entries = lock(&self.entries);
        entries.writes += 1;
        entries.unconfirmed = true;
    }

    /// The answer cached for `key` at `version`, if any; its 304 when `request`'s
    /// `If-None-Match` names the answer's tag; a page's rows when its total moved.
    fn find(&self, key: &Key, version: u64, request: &HeaderMap) -> Found {
        let entries = lock(&self.entries);
        let kept = (entries.version == version)
            .then(|| entries.map.get(key))
            .flatten();
        crate::metrics::cache(kept.is_some());
        let Some(kept) = kept else {
            return Found::Miss;
        };
        if let (Some(rows), Some(tally)) = (&kept.rows, entries.tally)
            && rows.total != tally.total
        {
            return Found::Rows(rows.clone(), tally.total, version);
        }
        Found::Hit(match &kept.not_modified {
            Some((tag, not_modified)) if conditional::none_match_names(request, tag.as_bytes()) => {
                copy(not_modified)
            }
            _ => copy(&kept.answer),
        })
    }

    /// Keeps `rendered` for `key`, read at `version` (in the same round trip) by a read
    /// that took `mark` before it started; nothing if this process wrote meanwhile.
    fn put(&self, key: Key, version: u64, mark: u64, rendered: &Rendered) {
        let answer = &rendered.answer;
        let size = answer.body().len();
        if size > self.limits.bytes {
            return;
        }
        let mut entries = lock(&self.entries);
        if version < entries.version || mark != entries.writes {
            return;
        }
        if version > entries.version {
            entries.renew(version, None);
        }
        // Read after this process's last write, at the cache's version: it is current.
        entries.unconfirmed = false;
        // Full: make room by dropping arbitrary entries.
        while !entries.map.is_empty()
            && (entries.map.len() >= self.limits.entries
                || entries.bytes + size > self.limits.bytes)
        {
            let victim = *entries.map.keys().next().expect("not empty");
            let removed = entries.map.remove(&victim).expect("present");
            entries.bytes -= removed.answer.body().len();
        }
        if self.limits.entries == 0 {
            return;
        }
        let mut answer = answer.clone();
        answer
            .headers_mut()
            .insert(REQUEST_ID, HeaderValue::from_static(""));
        let not_modified = (answer.status() == StatusCode::OK)
            .then(|| answer.headers().get(ETAG))
            .flatten()
            .map(|tag| {
                let mut not_modified = answer.clone();
                conditional::make_not_modified(&mut not_modified);
                (tag.clone(), not_modified)
            });
        let kept = Kept {
            answer,
            not_modified,
            rows: rendered.rows.clone(),
        };
        if let Some(old) = entries.map.insert(key, kept) {
            entries.bytes -= old.answer.body().len();
        }
        entries.bytes += size;
    }
}

/// A copy of `answer` (its request id slot included: see [`Kept`]).
pub(crate) fn copy(answer: &Response<Bytes>) -> Response<Bytes> {
    let mut response = Response::new(answer.body().clone());
    *response.status_mut() = answer.status();
    *response.headers_mut() = answer.headers().clone();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: Key = Key::Book {
        id: 1,
        author: false,
        xml: false,
    };

    fn answer(body: &'static str) -> Response<Bytes> {
        Response::new(Bytes::from_static(body.as_bytes()))
    }

    /// Counts version checks; each answers once the test lets it through, but the one
    /// numbered `panics` panics.
    #[derive(Debug)]
    struct Gated {
        calls: std::sync::atomic::AtomicU64,
        gate: tokio::sync::Semaphore,
        panics: u64,
    }

    #[async_trait::async_trait]
    impl BookStore for Gated {
        async fn version(&self) -> Result<Option<u64>, StoreError> {
            let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            self.gate.acquire().await.expect("open").forget();
            assert_ne!(call, self.panics, "a store that panics");
            Ok(Some(call))
        }
        async fn list(&self, _: u64, _: u32) -> Result<crate::BookPage, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn get(&self, _: i64) -> Result<Option<crate::BookRecord>, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn create(
            &self,
            _: &crate::BookInput,
            _: chrono::DateTime<chrono::Utc>,
        ) -> Result<crate::BookRecord, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn update(
            &self,
            _: i64,
            _: &crate::BookInput,
            _: chrono::DateTime<chrono::Utc>,
        ) -> Result<Option<crate::BookRecord>, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn delete(&self, _: i64) -> Result<bool, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn author_exists(&self, _: i64) -> Result<bool, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn update_if(
            &self,
            _: i64,
            _: &crate::BookInput,
            _: chrono::DateTime<chrono::Utc>,
            _: crate::Precondition<'_>,
        ) -> Result<crate::Guarded<Option<crate::BookRecord>>, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn delete_if(
            &self,
            _: i64,
            _: crate::Precondition<'_>,
        ) -> Result<crate::Guarded<bool>, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn create_keyed(
            &self,
            _: &crate::BookInput,
            _: chrono::DateTime<chrono::Utc>,
            _: &crate::IdempotencyKey,
        ) -> Result<crate::KeyedCreate, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn idempotency_record(
            &self,
            _: &str,
            _: chrono::DateTime<chrono::Utc>,
        ) -> Result<Option<crate::IdempotencyRecord>, StoreError> {
            unreachable!("only versions are asked")
        }
        async fn forget_expired_keys(
            &self,
            _: chrono::DateTime<chrono::Utc>,
            _: u32,
        ) -> Result<u64, StoreError> {
            unreachable!("only versions are asked")
        }
    }

    /// A check whose task panics hands its waiters an error, and the next request starts
    /// a check of its own rather than joining the dead one.
    #[tokio::test]
    async fn a_check_that_panics_fails_its_wave_only() {
        let cache = Cache::new(CacheLimits::default());
        let store: Arc<dyn BookStore> = Arc::new(Gated {
            calls: Default::default(),
            gate: tokio::sync::Semaphore::new(10),
            panics: 1,
        });
        let failed = tokio::time::timeout(Duration::from_secs(5), cache.check(&store)).await;
        assert!(failed.expect("answered, not stuck").is_err());
        let next = tokio::time::timeout(Duration::from_secs(5), cache.check(&store)).await;
        assert_eq!(next.expect("answered").expect("a reading").version, 2);
    }

    /// Requests that ask before a check is sent share it; one that asks after it was sent
    /// waits for a check of its own, sent after the first is done.
    #[tokio::test]
    async fn checks_are_shared_but_never_older_than_the_request() {
        let cache = Arc::new(Cache::new(CacheLimits::default()));
        let gated = Arc::new(Gated {
            calls: Default::default(),
            gate: tokio::sync::Semaphore::new(0),
            panics: 0,
        });
        let store: Arc<dyn BookStore> = gated.clone();
        let ask = |n: usize| {
            (0..n)
                .map(|_| {
                    let (cache, store) = (cache.clone(), store.clone());
                    tokio::spawn(async move { cache.check(&store).await.unwrap().version })
                })
                .collect::<Vec<_>>()
        };
        let early = ask(5);
        while gated.calls.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let late = ask(3);
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            gated.calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "one in flight"
        );
        gated.gate.add_permits(2);
        for early in early {
            assert_eq!(early.await.unwrap(), 1);
        }
        for late in late {
            assert_eq!(late.await.unwrap(), 2, "a check sent after it asked");
        }
        assert_eq!(gated.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    fn rendered(body: &'static str) -> Rendered {
        Rendered {
            answer: answer(body),
            version: None,
            rows: None,
        }
    }

    fn hit(found: Found) -> Option<Bytes> {
        match found {
            Found::Hit(hit) => Some(hit.into_body()),
            _ => None,
        }
    }

    /// A read that started before this process wrote keeps nothing, even at a version
    /// the cache would serve (a pushed version may not know of the write yet).
    #[test]
    fn a_read_older_than_our_write_keeps_nothing() {
        let cache = Cache::new(CacheLimits::default());
        let before = cache.look(&KEY, None).mark;
        cache.wrote();
        cache.put(KEY, 7, before, &rendered("old"));
        assert!(!cache.look(&KEY, None).held);
        assert!(hit(cache.find(&KEY, 7, &HeaderMap::new())).is_none());

        let after = cache.look(&KEY, None).mark;
        cache.put(KEY, 8, after, &rendered("new"));
        let hit_body = hit(cache.find(&KEY, 8, &HeaderMap::new())).expect("kept");
        assert_eq!(hit_body.as_ref(), b"new");
        assert!(
            hit(cache.find(&KEY, 7, &HeaderMap::new())).is_none(),
            "an older version never hits"
        );
    }

    /// After a write of this process, the version the store knows is not trusted until
    /// a check (or a read that started after the write) confirms the cache's.
    #[test]
    fn a_known_version_is_trusted_again_only_after_our_write_is_seen() {
        let cache = Cache::new(CacheLimits::default());
        let reading = |version| VersionReading {
            version,
            books: None,
        };
        let mark = cache.look(&KEY, None).mark;
        cache.put(KEY, 3, mark, &rendered("kept"));
        assert_eq!(
            cache.look(&KEY, Some(3)).trusted,
            None,
            "until a check read it"
        );
        lock(&cache.entries).checked_at(reading(3), mark);
        assert_eq!(cache.look(&KEY, Some(3)).trusted, Some(3));
        cache.wrote();
        assert_eq!(
            cache.look(&KEY, Some(3)).trusted,
            None,
            "maybe not pushed yet"
        );
        lock(&cache.entries).checked_at(reading(4), mark);
        assert_eq!(
            cache.look(&KEY, Some(4)).trusted,
            None,
            "a check sent before it"
        );
        let mark = cache.look(&KEY, None).mark;
        lock(&cache.entries).checked_at(reading(4), mark);
        assert_eq!(cache.look(&KEY, Some(4)).trusted, Some(4));
    }

    fn tally(changes: u64, total: u64, max_id: i64, above: i64, count_above: u64) -> BooksTally {
        BooksTally {
            changes,
            total,
            max_id,
            above,
            count_above,
        }
    }

    fn page(ids: std::ops::RangeInclusive<i64>, full: bool, total: u64) -> Rendered {
        let books = ids
            .map(|id| BookRecord {
                id,
                title: "t".into(),
                year: 2020,
                author_id: None,
                author_name: None,
                created_at: chrono::DateTime::UNIX_EPOCH,
                updated_at: chrono::DateTime::UNIX_EPOCH,
            })
            .collect();
        Rendered {
            answer: answer("page"),
            version: None,
            rows: Some(Arc::new(PageRows { books, full, total })),
        }
    }

    fn list(page: u64) -> Key {
        Key::List {
            page,
            author: false,
            action: false,
            xml: false,
        }
    }

    /// Only appends above the old greatest id keep books and full pages (whose rows come
    /// back to be rendered under the new total); anything else empties the cache.
    #[test]
    fn appends_keep_books_and_full_pages() {
        let cache = Cache::new(CacheLimits::default());
        let start = VersionReading {
            version: 10,
            books: Some(tally(5, 25, 25, i64::MAX, 0)),
        };
        lock(&cache.entries).advance(start);
        let mark = cache.look(&KEY, None).mark;
        cache.put(KEY, 10, mark, &rendered("book"));
        cache.put(list(1), 10, mark, &page(1..=20, true, 25));
        cache.put(list(2), 10, mark, &page(21..=25, false, 25));

        // Two books added above 25, nothing else.
        lock(&cache.entries).advance(VersionReading {
            version: 12,
            books: Some(tally(5, 27, 27, 25, 2)),
        });
        assert!(hit(cache.find(&KEY, 12, &HeaderMap::new())).is_some());
        match cache.find(&list(1), 12, &HeaderMap::new()) {
            Found::Rows(rows, total, 12) => {
                assert_eq!((rows.books.len(), total), (20, 27));
            }
            _ => panic!("page 1's rows, to render under 27"),
        }
        assert!(matches!(
            cache.find(&list(2), 12, &HeaderMap::new()),
            Found::Miss
        ));

        // A book added below the old greatest id (a host's explicit id): not appends.
        lock(&cache.entries).advance(VersionReading {
            version: 13,
            books: Some(tally(5, 28, 27, 27, 0)),
        });
        assert!(matches!(
            cache.find(&KEY, 13, &HeaderMap::new()),
            Found::Miss
        ));
        assert!(matches!(
            cache.find(&list(1), 13, &HeaderMap::new()),
            Found::Miss
        ));

        // Any other write moves `changes`.
        cache.put(KEY, 13, mark, &rendered("book"));
        lock(&cache.entries).advance(VersionReading {
            version: 14,
            books: Some(tally(6, 28, 27, 27, 0)),
        });
        assert!(matches!(
            cache.find(&KEY, 14, &HeaderMap::new()),
            Found::Miss
        ));
    }
}
