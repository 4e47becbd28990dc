//! Rendered book and page answers, reused while the store's version holds.
//!
//! Exact: a read never returns data older than the last write acknowledged before the
//! read started, whichever process made it. Every cached answer is served only after a
//! version check *sent after its request arrived*; checks are shared, so under load one
//! check in flight (and the one queued behind it) answers for every request that
//! arrived before it was sent. A key the cache does not hold skips the check and reads
//! at once: the store returns the version with the data, and the answer is kept under
//! it. Entries are kept only for the newest version seen: a write makes them all stale;
//! this process's own writes clear them at once, others' at the next check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt, Shared};
use http::Response;

use crate::metrics::store_call;
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
    map: HashMap<Key, Response<Bytes>>,
    bytes: usize,
}

#[derive(Default)]
struct Checks {
    next_id: u64,
    /// The check in flight.
    running: Option<(u64, Check)>,
    /// The check that starts once `running` is done; requests arriving meanwhile join it.
    queued: Option<(u64, Check)>,
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
            if let Some((_, queued)) = &checks.queued {
                queued.clone()
            } else {
                checks.next_id += 1;
                let id = checks.next_id;
                let after = checks.running.as_ref().map(|(_, running)| running.clone());
                let check = Self::check(self.checks.clone(), id, store.clone(), after.clone());
                if after.is_some() {
                    checks.queued = Some((id, check.clone()));
                } else {
                    checks.running = Some((id, check.clone()));
                }
                check
            }
        };
        check.await
    }

    /// One version query, sent once `after` (the check in flight) is done.
    fn check(
        checks: Arc<Mutex<Checks>>,
        id: u64,
        store: Arc<dyn BookStore>,
        after: Option<Check>,
    ) -> Check {
        async move {
            if let Some(after) = after {
                let _ = after.await;
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

    /// The answer cached for `key` at `version`, if any.
    pub(crate) fn get(&self, key: &Key, version: u64) -> Option<Response<Bytes>> {
        let mut entries = lock(&self.entries);
        if version > entries.version {
            entries.renew(version);
        }
        let hit = (entries.version == version)
            .then(|| entries.map.get(key).cloned())
            .flatten();
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
            entries.bytes -= removed.body().len();
        }
        if self.limits.entries == 0 {
            return;
        }
        if let Some(old) = entries.map.insert(key, answer.clone()) {
            entries.bytes -= old.body().len();
        }
        entries.bytes += size;
    }
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

    /// A read that started before this process wrote keeps nothing, even at a version
    /// the cache would serve (a pushed version may not know of the write yet).
    #[test]
    fn a_read_older_than_our_write_keeps_nothing() {
        let cache = Cache::new(CacheLimits::default());
        let (_, before) = cache.holds(&KEY);
        cache.clear();
        cache.put(KEY, 7, before, &answer("old"));
        assert!(!cache.holds(&KEY).0);
        assert!(cache.get(&KEY, 7).is_none());

        let (_, after) = cache.holds(&KEY);
        cache.put(KEY, 8, after, &answer("new"));
        let hit = cache.get(&KEY, 8).expect("kept");
        assert_eq!(hit.body().as_ref(), b"new");
        assert!(cache.get(&KEY, 7).is_none(), "an older version never hits");
    }
}
