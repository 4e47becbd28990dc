//! The store with the versions tier: the data and versions tiers of the conformance
//! suite (writes from outside the store between the reads) and the HTTP contract with the
//! cache on; and a store that keeps its version in memory instead, which the suite
//! catches.

mod common;

use books_core::Config;
use books_core::testing::InProcess;
use books_example_legacy_store::CatalogueStore;
use books_example_legacy_store::versions::VERSION_TABLE;

async fn fresh() -> CatalogueStore {
    CatalogueStore::with_versions(common::host_database(VERSION_TABLE).await)
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        setup: fresh,
        tiers: [versions],
        outside_writes: common::host_writes,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(config: Config) -> InProcess<CatalogueStore> {
        InProcess::new(fresh().await, config)
    }
    books_core::http_contract_suite!(in_process);
}

/// The mistake the suite exists to catch: the version kept in memory, moved by the
/// store's own writes only.
mod version_in_memory {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use async_trait::async_trait;
    use books_core::store::*;
    use books_core::testing::store_cases::{self, Outside};
    use chrono::{DateTime, Utc};

    use super::*;

    #[derive(Debug, Clone)]
    struct Forgetful(CatalogueStore, Arc<AtomicU64>);

    impl Forgetful {
        fn wrote<T>(&self, outcome: T) -> T {
            self.1.fetch_add(1, Ordering::SeqCst);
            outcome
        }
    }

    #[async_trait]
    impl BookStore for Forgetful {
        async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
            self.0.list(query).await
        }
        async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
            self.0.get(id).await
        }
        async fn create(
            &self,
            b: &BookInput,
            now: DateTime<Utc>,
        ) -> Result<BookRecord, StoreError> {
            let created = self.0.create(b, now).await;
            self.wrote(created)
        }
        async fn update(
            &self,
            id: i64,
            b: &BookInput,
            now: DateTime<Utc>,
        ) -> Result<Option<BookRecord>, StoreError> {
            let updated = self.0.update(id, b, now).await;
            self.wrote(updated)
        }
        async fn delete(&self, id: i64) -> Result<bool, StoreError> {
            let deleted = self.0.delete(id).await;
            self.wrote(deleted)
        }
        async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
            self.0.author_exists(id).await
        }
        fn capabilities(&self) -> Capabilities<'_> {
            Capabilities::none().with_versions(self)
        }
    }

    #[async_trait]
    impl AuthorStore for Forgetful {
        async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
            let added = self.0.add_author(name).await;
            self.wrote(added)
        }
        async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
            let removed = self.0.remove_author(id).await;
            self.wrote(removed)
        }
    }

    #[async_trait]
    impl Versions for Forgetful {
        async fn version(&self) -> Result<u64, StoreError> {
            Ok(self.1.load(Ordering::SeqCst))
        }
        async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
            let at = self.1.load(Ordering::SeqCst);
            Ok((self.0.list(query).await?, at))
        }
        async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
            let at = self.1.load(Ordering::SeqCst);
            Ok((self.0.get(id).await?, at))
        }
    }

    async fn forgetful() -> Forgetful {
        Forgetful(CatalogueStore::new(common::host_database("").await), Arc::default())
    }

    async fn host_writes(store: Forgetful, write: store_cases::OutsideWrite) {
        common::host_writes(store.0, write).await;
    }

    #[tokio::test]
    #[should_panic(expected = "from outside the store")]
    async fn a_version_in_memory_misses_writes_from_outside() {
        let outside = Outside::through(host_writes);
        store_cases::version_moves_with_every_write(forgetful().await, outside).await;
    }

    #[tokio::test]
    #[should_panic(expected = "the old tag is stale")]
    async fn a_version_in_memory_serves_a_stale_title() {
        let outside = Outside::through(host_writes);
        store_cases::cached_reads_see_writes_from_outside(forgetful().await, outside).await;
    }
}
