//! A store whose author vanishes just before each write, as if another client deleted it
//! between validation and the write: what the data, conditional writes and idempotent
//! creates tiers each answer then (a 422 on `author_id`, nothing stored).

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use http::Request;

use super::{Fixture, TestStore, author, create, query};
use crate::api::BooksApi;
use crate::config::Config;
use crate::store::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, Capabilities, Conditional,
    ConditionalWrites, IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate,
    ListQuery, Precondition, StoreError,
};

/// Wraps a store: every write removes its author first. `T` says which write tier it
/// serves beside the data tier ([`Plain`], [`Conditionally`], [`Keyed`]), each by
/// removing the author and then calling the inner store's.
pub(super) struct VanishingAuthor<S, T> {
    fixture: Fixture<S>,
    tier: PhantomData<fn() -> T>,
}

impl<S: std::fmt::Debug, T> std::fmt::Debug for VanishingAuthor<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("VanishingAuthor")
            .field(&*self.fixture)
            .finish()
    }
}

/// The data tier alone.
#[derive(Debug)]
pub(super) struct Plain;
/// With conditional writes.
#[derive(Debug)]
pub(super) struct Conditionally;
/// With idempotent creates.
#[derive(Debug)]
pub(super) struct Keyed;

/// The tiers a [`VanishingAuthor`] names.
pub(super) trait Tier<S>: Sized + Send + Sync + 'static {
    fn capabilities(store: Arc<VanishingAuthor<S, Self>>)
    -> Capabilities<VanishingAuthor<S, Self>>;
}

impl<S: TestStore> Tier<S> for Plain {
    fn capabilities(
        store: Arc<VanishingAuthor<S, Self>>,
    ) -> Capabilities<VanishingAuthor<S, Self>> {
        Capabilities::of(store)
    }
}

impl<S: TestStore + ConditionalWrites> Tier<S> for Conditionally {
    fn capabilities(
        store: Arc<VanishingAuthor<S, Self>>,
    ) -> Capabilities<VanishingAuthor<S, Self>> {
        Capabilities::of(store).conditional_writes()
    }
}

impl<S: TestStore + IdempotentCreates> Tier<S> for Keyed {
    fn capabilities(
        store: Arc<VanishingAuthor<S, Self>>,
    ) -> Capabilities<VanishingAuthor<S, Self>> {
        Capabilities::of(store).idempotent_creates()
    }
}

impl<S: TestStore, T> VanishingAuthor<S, T> {
    fn new(fixture: &Fixture<S>) -> Self {
        Self {
            fixture: fixture.clone(),
            tier: PhantomData,
        }
    }

    async fn vanish(&self, author: i64) -> Result<(), StoreError> {
        self.fixture.remove_author(author).await.map(drop)
    }
}

#[async_trait]
impl<S: TestStore, T: Tier<S>> BookStore for VanishingAuthor<S, T> {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        self.fixture.list(query).await
    }
    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        self.fixture.get(id).await
    }
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        self.vanish(book.author_id).await?;
        self.fixture.create(book, now).await
    }
    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        self.vanish(book.author_id).await?;
        self.fixture.update(id, book, now).await
    }
    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        self.fixture.delete(id).await
    }
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        self.fixture.author_exists(id).await
    }
    fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
        T::capabilities(self)
    }
}

#[async_trait]
impl<S: TestStore + ConditionalWrites> ConditionalWrites for VanishingAuthor<S, Conditionally> {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        self.vanish(book.author_id).await?;
        self.fixture.update_if(id, book, now, precondition).await
    }
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        self.fixture.delete_if(id, precondition).await
    }
}

#[async_trait]
impl<S: TestStore + IdempotentCreates> IdempotentCreates for VanishingAuthor<S, Keyed> {
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        self.vanish(book.author_id).await?;
        self.fixture.create_keyed(book, now, key).await
    }
    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.fixture.idempotency_record(key, now).await
    }
    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        self.fixture.forget_expired_keys(now, limit).await
    }
}

/// Sends each `(method, header)` write through an API over `VanishingAuthor<S, T>`, with
/// an author that vanishes before it: a 422 on `author_id` every time, and nothing
/// stored or changed.
pub(super) async fn author_vanishing_before<S: TestStore, T: Tier<S>>(
    store: &Fixture<S>,
    writes: &[(&str, Option<(&str, &str)>)],
) {
    let keep = author(store, "Kept").await;
    let id = create(store, "existing", keep).await;
    let api = BooksApi::new(VanishingAuthor::<S, T>::new(store), Config::default());
    for &(method, header) in writes {
        let path = match method {
            "PUT" => format!("/api/books/{id}"),
            _ => "/api/books".to_owned(),
        };
        let doomed = author(store, "Doomed").await;
        let mut request = Request::builder().method(method).uri(path);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        let request = request
            .body(format!("title=T&author_id={doomed}&year=2020"))
            .unwrap();
        let response = api.handle(request).await;
        assert_eq!(response.status(), 422, "{method} {header:?}");
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(
            body["errors"],
            serde_json::json!({"author_id": ["The selected author id is invalid."]}),
            "{method} {header:?}"
        );
    }
    let page = store.list(&query(0, 20)).await.unwrap();
    assert_eq!(page.total, 1, "nothing stored");
    assert_eq!(page.books[0].title, "existing", "nothing changed");
}
