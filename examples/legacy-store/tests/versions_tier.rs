//! The store against the conformance suite (every tier, with the host's own SQL writing
//! beside the reads and a backup restored under them) and the HTTP contract with the
//! cache on; and two mistakes the suite exists to catch: a version kept in memory, and a
//! page whose total is read in another snapshot than its rows.

mod common;

use books_core::Config;
use books_core::testing::InProcess;
use books_example_legacy_store::CatalogueStore;

use common::fresh;

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        setup: fresh,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: common::host_writes,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(config: Config) -> InProcess<CatalogueStore> {
        InProcess::new(fresh().await, config)
    }
    books_core::http_contract_suite! {
        make: in_process,
        outside_writes: common::host_writes,
    }
}

/// The mistakes, each a wrapper of the store that makes it; the suite's cases fail them.
mod mistakes {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use async_trait::async_trait;
    use books_core::store::*;
    use books_core::testing::store_cases::{self, Fixture, Outside, OutsideWrite, ThroughStore};
    use chrono::{DateTime, Utc};

    use super::*;

    /// The store with its version kept in memory (moved by its own writes only), or its
    /// pages' totals counted apart from their rows (`split`).
    #[derive(Debug, Clone)]
    struct Mistaken {
        store: CatalogueStore,
        version: Arc<AtomicU64>,
        split: bool,
    }

    impl Mistaken {
        fn wrote<T>(&self, outcome: T) -> T {
            self.version.fetch_add(1, Ordering::SeqCst);
            outcome
        }
    }

    #[async_trait]
    impl BookStore for Mistaken {
        async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
            let page = self.store.list(query).await?;
            if !self.split {
                return Ok(page);
            }
            // The total from a statement of its own, on another connection.
            let all = ListQuery::new(0, u32::MAX);
            let total = self.store.list(&all).await?.books.len() as u64;
            Ok(BookPage { total, ..page })
        }
        async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
            self.store.get(id).await
        }
        async fn create(&self, b: &BookInput, at: DateTime<Utc>) -> Result<BookRecord, StoreError> {
            let created = self.store.create(b, at).await;
            self.wrote(created)
        }
        async fn update(
            &self,
            id: i64,
            b: &BookInput,
            at: DateTime<Utc>,
        ) -> Result<Option<BookRecord>, StoreError> {
            let updated = self.store.update(id, b, at).await;
            self.wrote(updated)
        }
        async fn delete(&self, id: i64) -> Result<bool, StoreError> {
            let deleted = self.store.delete(id).await;
            self.wrote(deleted)
        }
        async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
            self.store.author_exists(id).await
        }
        fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
            Capabilities::of(self).versions()
        }
    }

    #[async_trait]
    impl AuthorStore for Mistaken {
        async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
            let added = self.store.add_author(name).await;
            self.wrote(added)
        }
        async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
            let removed = self.store.remove_author(id).await;
            self.wrote(removed)
        }
    }

    #[async_trait]
    impl Versions for Mistaken {
        async fn version(&self) -> Result<Version, StoreError> {
            Ok(Version::new(0, self.version.load(Ordering::SeqCst)))
        }
        async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
            let at = self.version.load(Ordering::SeqCst);
            Ok((self.list(query).await?, at))
        }
        async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
            let at = self.version.load(Ordering::SeqCst);
            Ok((self.store.get(id).await?, at))
        }
    }

    async fn mistaken(split: bool) -> Fixture<Mistaken> {
        let store = Mistaken { store: fresh().await, version: Arc::default(), split };
        let outside = Outside::through(|store: Mistaken, write: OutsideWrite| {
            common::host_writes(store.store, write)
        });
        Fixture::new(store, ThroughStore, Some(outside))
    }

    /// The HTTP suite, given the same hook, catches it too: a cached answer served on.
    #[tokio::test]
    #[should_panic(expected = "a book retitled from outside")]
    async fn the_http_suite_catches_a_version_in_memory() {
        let make = |config: Config| async move {
            let store = Mistaken { store: fresh().await, version: Arc::default(), split: false };
            InProcess::new(store, config)
        };
        let outside = Outside::through(|store: Mistaken, write: OutsideWrite| {
            common::host_writes(store.store, write)
        });
        books_core::testing::http_cases::reads_follow_writes_from_outside(&make, &outside).await;
    }

    #[tokio::test]
    #[should_panic(expected = "from outside the store")]
    async fn a_version_in_memory_misses_writes_from_outside() {
        store_cases::version_moves_with_writes_from_outside(mistaken(false).await).await;
    }

    #[tokio::test]
    #[should_panic(expected = "the old tag is stale")]
    async fn a_version_in_memory_serves_a_stale_title() {
        store_cases::cached_reads_see_writes_from_outside(mistaken(false).await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "two snapshots")]
    async fn a_total_counted_apart_from_its_page_is_caught() {
        store_cases::pages_and_totals_come_from_one_snapshot(mistaken(true).await).await;
    }
}
