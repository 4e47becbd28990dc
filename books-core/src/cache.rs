//! Rendered book and page answers, reused while the store's version holds.
//!
//! Exact: a read never returns data older than the last write acknowledged before the
//! read started, whichever process made it. Every cached answer is served only after a
//! version check *sent after its request arrived*; checks are shared, so under load one
//! check in flight (and the one queued behind it) answers for every request that
//! arrived before it was sent. A check waits before it is sent while the runtime keeps
//! reading requests that join it (under tokio: scheduler rounds, until two quiet ones,
//! [`MAX_ROUNDS`] or [`MAX_WAIT`]), so one check serves a whole wave of requests rather
//! than the first few: a few microseconds more latency alone, far fewer queries under
//! load (BENCHMARKS.md). A key the cache does not hold skips the check and reads
//! at once: the store returns the version with the data, and the answer is kept under
//! it. Entries are kept only for the newest version seen: a write makes them all stale;
//! this process's own writes clear them at once, others' at the next check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt, Shared};
use http::header::{ETAG, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

use crate::conditional;
use crate::metrics::store_call;
use crate::request_id::REQUEST_ID;
use crate::store::{BookStore, StoreError};

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

/// Most scheduler rounds a check waits for requests to join it before it is sent.
const MAX_ROUNDS: u32 = 16;

/// Longest a check waits for requests to join it: rounds are short (each runs what
/// became ready since the last), but a busy runtime's can be long.
const MAX_WAIT: Duration = Duration::from_millis(1);

type Check = Shared<BoxFuture<'static, Result<Option<u64>, Arc<StoreError>>>>;

#[derive(Debug)]
pub(crate) struct Cache {
    limits: CacheLimits,
    entries: Mutex<Entries>,
    checks: Arc<Mutex<Checks>>,
}

#[derive(Debug, Default)]
struct Entries {
    /// The version every entry belongs to.
    version: u64,
    /// How many times this process wrote: a read that started before a write keeps
    /// nothing (its version may be older than the write's, which a pushed version may
    /// not know yet).
    writes: u64,
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
}

#[derive(Default)]
struct Checks {
    next_id: u64,
    /// The check in flight.
    running: Option<(u64, Check)>,
    /// The check not sent yet (it waits for `running`, then for the runtime to run
    /// what is ready); requests arriving meanwhile join it.
    queued: Option<(u64, Check)>,
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
    /// Empty, for `version`.
    fn renew(&mut self, version: u64) {
        self.version = version;
        self.map.clear();
        self.bytes = 0;
    }
}

impl Cache {
    pub(crate) fn new(limits: CacheLimits) -> Self {
        Self {
            limits,
            entries: Mutex::default(),
            checks: Arc::default(),
        }
    }

    /// The store's version, from a check sent after this call (shared with every caller
    /// that joins before it is sent). `None`: the store keeps no version.
    pub(crate) async fn version(
        &self,
        store: &Arc<dyn BookStore>,
    ) -> Result<Option<u64>, Arc<StoreError>> {
        let check = {
            let mut checks = lock(&self.checks);
            checks.joined += 1;
            if let Some((_, queued)) = &checks.queued {
                queued.clone()
            } else {
                checks.next_id += 1;
                let id = checks.next_id;
                let after = checks.running.as_ref().map(|(_, running)| running.clone());
                let check = Self::check(self.checks.clone(), id, store.clone(), after);
                checks.queued = Some((id, check.clone()));
                check
            }
        };
        check.await
    }

    /// One version query, sent once `after` (the check in flight) is done and the
    /// requests the runtime has already read had their turn to join.
    fn check(
        checks: Arc<Mutex<Checks>>,
        id: u64,
        store: Arc<dyn BookStore>,
        after: Option<Check>,
    ) -> Check {
        async move {
            if let Some(after) = after {
                let _ = after.await;
            }
            // Under tokio a yield resumes once every ready task ran and the I/O driver
            // was polled: wait while rounds bring new joiners (two at least: a resumed
            // task runs before those its round woke), up to `MAX_ROUNDS` and `MAX_WAIT`.
            let mut seen = lock(&checks).joined;
            let mut quiet = 0;
            let waiting = Instant::now();
            for _ in 1..=MAX_ROUNDS {
                if waiting.elapsed() >= MAX_WAIT {
                    break;
                }
                tokio::task::yield_now().await;
                let joined = lock(&checks).joined;
                quiet = if joined == seen { quiet + 1 } else { 0 };
                if quiet == 2 {
                    break;
                }
                seen = joined;
            }
            {
                let mut slots = lock(&checks);
                if slots
                    .queued
                    .as_ref()
                    .is_some_and(|(queued, _)| *queued == id)
                {
                    slots.running = slots.queued.take();
                }
            }
            let version = store_call("version", store.version())
                .await
                .map_err(Arc::new);
            let mut slots = lock(&checks);
            if slots
                .running
                .as_ref()
                .is_some_and(|(running, _)| *running == id)
            {
                slots.running = None;
            }
            version
        }
        .boxed()
        .shared()
    }

    /// Whether an answer for `key` is kept (at the newest version seen, which may be
    /// stale: only [`get`](Self::get) after a check can tell), and the mark a read that
    /// starts after this call hands to [`put`](Self::put).
    pub(crate) fn holds(&self, key: &Key) -> (bool, u64) {
        let entries = lock(&self.entries);
        (entries.map.contains_key(key), entries.writes)
    }

    /// Drops every answer: this process just wrote.
    pub(crate) fn clear(&self) {
        let mut entries = lock(&self.entries);
        entries.map.clear();
        entries.bytes = 0;
        entries.writes += 1;
    }

    /// The answer cached for `key` at `version`, if any; its 304 when `request`'s
    /// `If-None-Match` names the answer's tag.
    pub(crate) fn get(
        &self,
        key: &Key,
        version: u64,
        request: &HeaderMap,
    ) -> Option<Response<Bytes>> {
        let mut entries = lock(&self.entries);
        if version > entries.version {
            entries.renew(version);
        }
        let hit = (entries.version == version)
            .then(|| entries.map.get(key))
            .flatten()
            .map(|kept| match &kept.not_modified {
                Some((tag, not_modified))
                    if conditional::none_match_fails(request, tag.as_bytes()) =>
                {
                    copy(not_modified)
                }
                _ => copy(&kept.answer),
            });
        crate::metrics::cache(hit.is_some());
        hit
    }

    /// Keeps `answer` for `key`, read at `version` (in the same round trip) by a read
    /// that took `mark` before it started; nothing if this process wrote meanwhile.
    pub(crate) fn put(&self, key: Key, version: u64, mark: u64, answer: &Response<Bytes>) {
        let size = answer.body().len();
        if size > self.limits.bytes {
            return;
        }
        let mut entries = lock(&self.entries);
        if version < entries.version || mark != entries.writes {
            return;
        }
        if version > entries.version {
            entries.renew(version);
        }
        // Full: make room by dropping arbitrary entries (a write clears all anyway).
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

    /// Counts version checks; each answers once the test lets it through.
    #[derive(Debug)]
    struct Gated {
        calls: std::sync::atomic::AtomicU64,
        gate: tokio::sync::Semaphore,
    }

    #[async_trait::async_trait]
    impl BookStore for Gated {
        async fn version(&self) -> Result<Option<u64>, StoreError> {
            let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            self.gate.acquire().await.expect("open").forget();
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

    /// Requests that ask before a check is sent share it; one that asks after it was sent
    /// waits for a check of its own, sent after the first is done.
    #[tokio::test]
    async fn checks_are_shared_but_never_older_than_the_request() {
        let cache = Arc::new(Cache::new(CacheLimits::default()));
        let gated = Arc::new(Gated {
            calls: Default::default(),
            gate: tokio::sync::Semaphore::new(0),
        });
        let store: Arc<dyn BookStore> = gated.clone();
        let ask = |n: usize| {
            (0..n)
                .map(|_| {
                    let (cache, store) = (cache.clone(), store.clone());
                    tokio::spawn(async move { cache.version(&store).await.unwrap() })
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
            assert_eq!(early.await.unwrap(), Some(1));
        }
        for late in late {
            assert_eq!(late.await.unwrap(), Some(2), "a check sent after it asked");
        }
        assert_eq!(gated.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// A read that started before this process wrote keeps nothing, even at a version
    /// the cache would serve (a pushed version may not know of the write yet).
    #[test]
    fn a_read_older_than_our_write_keeps_nothing() {
        let cache = Cache::new(CacheLimits::default());
        let (_, before) = cache.holds(&KEY);
        cache.clear();
        cache.put(KEY, 7, before, &answer("old"));
        assert!(!cache.holds(&KEY).0);
        assert!(cache.get(&KEY, 7, &HeaderMap::new()).is_none());

        let (_, after) = cache.holds(&KEY);
        cache.put(KEY, 8, after, &answer("new"));
        let hit = cache.get(&KEY, 8, &HeaderMap::new()).expect("kept");
        assert_eq!(hit.body().as_ref(), b"new");
        assert!(
            cache.get(&KEY, 7, &HeaderMap::new()).is_none(),
            "an older version never hits"
        );
    }
}
