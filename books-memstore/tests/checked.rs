//! `checked_api!` refuses a store whose type implements a tier its `capabilities()` do
//! not name, and builds the API over one that names them all.

use std::sync::Arc;

use async_trait::async_trait;
use books_core::store::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, Capabilities, Conditional,
    ConditionalWrites, Hooked, ListQuery, Precondition, StoreError, Tiers,
};
use books_core::testing::CountingHook;
use books_core::testing::store_cases::{Fixture, ThroughStore, capabilities_are_the_tiers_tested};
use books_core::{Config, checked_api, implemented_tiers};
use books_memstore::MemStore;
use chrono::{DateTime, Utc};

/// A hand-written wrapper that forwards the data tier and conditional writes, and names
/// neither in its capabilities: `If-Match` would be 501 behind it.
#[derive(Debug, Clone)]
struct Forgetful(MemStore);

#[async_trait]
impl BookStore for Forgetful {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        self.0.list(query).await
    }
    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        self.0.get(id).await
    }
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        self.0.create(book, now).await
    }
    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        self.0.update(id, book, now).await
    }
    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        self.0.delete(id).await
    }
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        self.0.author_exists(id).await
    }
    fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
        Capabilities::of(self)
    }
}

#[async_trait]
impl ConditionalWrites for Forgetful {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        self.0.update_if(id, book, now, precondition).await
    }
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        self.0.delete_if(id, precondition).await
    }
}

#[async_trait]
impl AuthorStore for Forgetful {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        self.0.add_author(name).await
    }
    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        self.0.remove_author(id).await
    }
}

#[test]
fn a_store_that_forgets_a_tier_it_implements_is_refused_naming_it() {
    let forgetful = Forgetful(MemStore::new());
    let mut implemented = Tiers::default();
    implemented.conditional_writes = true;
    assert_eq!(implemented_tiers!(&forgetful), implemented);
    let refused = checked_api!(forgetful, Config::default()).unwrap_err();
    assert_eq!(refused.missing, ["conditional writes"]);
    let message = refused.to_string();
    assert!(message.contains("Forgetful"), "{message}");
    assert!(
        message.contains("implements conditional writes"),
        "{message}"
    );
}

#[test]
fn stores_that_name_every_tier_they_implement_are_built() {
    assert_eq!(implemented_tiers!(&MemStore::new()), Tiers::ALL);
    let api = checked_api!(MemStore::new(), Config::default()).unwrap();
    assert_eq!(api.tiers(), Tiers::ALL);
    // A generic wrapper that keeps every tier of the store inside.
    let hooked = Hooked::new(MemStore::new(), CountingHook::default());
    assert_eq!(implemented_tiers!(&hooked), Tiers::ALL);
    let api = checked_api!(hooked, Config::default()).unwrap();
    assert_eq!(api.tiers(), Tiers::ALL);
}

/// The suite's capabilities case, which every `store_conformance_suite!` runs, fails it
/// too (here with the tiers its suite would list: none).
#[tokio::test]
#[should_panic(expected = "the store implements conditional writes")]
async fn the_conformance_suite_fails_a_store_that_forgets_a_tier() {
    let fixture = Fixture::new(Forgetful(MemStore::new()), ThroughStore, None);
    capabilities_are_the_tiers_tested(fixture, Tiers::default(), |store| implemented_tiers!(store))
        .await;
}
