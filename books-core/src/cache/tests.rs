//! [`read_through`] over a store of the test's own: the cache protocol as a request meets
//! it (invariants 1, 4 and 8 end to end).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use super::*;
use crate::store::{BookPage, ListQuery};

/// The database a test stands for: its version, the one title it holds, and how often
/// the cache asked for the version.
#[derive(Debug, Default)]
struct Database {
    state: Mutex<(Version, &'static str)>,
    known: Mutex<Option<Version>>,
    checks: AtomicUsize,
}

impl Database {
    fn write(&self, version: Version, title: &'static str) {
        *self.state.lock().unwrap() = (version, title);
    }

    fn read(&self) -> (Version, &'static str) {
        *self.state.lock().unwrap()
    }
}

#[async_trait]
impl Versions for Database {
    async fn version(&self) -> Result<Version, StoreError> {
        self.checks.fetch_add(1, Ordering::Relaxed);
        Ok(self.read().0)
    }
    async fn list_versioned(&self, _: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        Ok((BookPage::default(), self.read().0.count))
    }
    async fn get_versioned(&self, _: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        Ok((None, self.read().0.count))
    }
    fn known_version(&self) -> Option<Version> {
        *self.known.lock().unwrap()
    }
}

const KEY: Key = Key::Book {
    id: 1,
    author: false,
    xml: false,
};

/// A cache over `database`, and a read through it that counts its renders.
struct Reader {
    database: Arc<Database>,
    cache: Cache,
    renders: AtomicUsize,
}

impl Reader {
    fn new() -> Self {
        let database = Arc::new(Database::default());
        database.write(Version::new(7, 100), "first");
        let source = VersionSource {
            versions: database.clone(),
            tally: None,
        };
        Self {
            cache: Cache::new(CacheLimits::default(), Some(source)),
            database,
            renders: AtomicUsize::new(0),
        }
    }

    /// The body answered, and whether it was rendered (not served from the cache).
    async fn read(&self) -> (String, bool) {
        let before = self.renders.load(Ordering::Relaxed);
        let answer = read_through(Some(&self.cache), KEY, &HeaderMap::new(), |_| async {
            self.renders.fetch_add(1, Ordering::Relaxed);
            let (version, title) = self.database.read();
            Ok::<_, Arc<StoreError>>(Rendered {
                answer: Response::new(Bytes::from(title)),
                count: Some(version.count),
                rows: None,
            })
        })
        .await
        .expect("read");
        let body = String::from_utf8(answer.into_body().to_vec()).unwrap();
        (body, self.renders.load(Ordering::Relaxed) > before)
    }
}

/// Invariant 1: a kept answer is served after a check finds its count, and a write made
/// elsewhere is seen by the next read.
#[tokio::test]
async fn a_write_from_elsewhere_is_seen_by_the_next_read() {
    let reader = Reader::new();
    assert_eq!(
        reader.read().await,
        ("first".into(), true),
        "a miss renders"
    );
    assert_eq!(reader.read().await, ("first".into(), false), "a hit");
    assert_eq!(reader.database.checks.load(Ordering::Relaxed), 1);
    reader.database.write(Version::new(7, 103), "second");
    assert_eq!(reader.read().await, ("second".into(), true));
    assert_eq!(reader.read().await, ("second".into(), false));
}

/// Invariant 8: a database rewound to an older state (a lost failover, a restored
/// backup), whatever its count or history, is never answered from what was kept.
#[tokio::test]
async fn a_rewound_database_is_never_served_from_the_cache() {
    let reader = Reader::new();
    reader.read().await;
    assert_eq!(reader.read().await, ("first".into(), false));
    reader.database.write(Version::new(7, 90), "restored");
    assert_eq!(reader.read().await, ("restored".into(), true), "went back");
    assert_eq!(reader.read().await, ("restored".into(), false));
    reader.database.write(Version::new(8, 90), "promoted");
    assert_eq!(
        reader.read().await,
        ("promoted".into(), true),
        "the same count in another history"
    );
    assert_eq!(reader.read().await, ("promoted".into(), false));
}

/// Invariant 4: a version the store knows without asking spares the check once a check
/// confirmed it; one this process's write may not be in yet is not trusted.
#[tokio::test]
async fn a_known_version_spares_the_check_until_our_write() {
    let reader = Reader::new();
    *reader.database.known.lock().unwrap() = Some(Version::new(7, 100));
    reader.read().await;
    reader.read().await;
    let checks = reader.database.checks.load(Ordering::Relaxed);
    assert_eq!(reader.read().await, ("first".into(), false));
    assert_eq!(
        reader.database.checks.load(Ordering::Relaxed),
        checks,
        "trusted: no check"
    );
    reader.cache.wrote();
    assert_eq!(reader.read().await.0, "first");
    assert_eq!(
        reader.database.checks.load(Ordering::Relaxed),
        checks + 1,
        "after our write, a check"
    );
}
