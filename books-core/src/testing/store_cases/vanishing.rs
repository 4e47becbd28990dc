//! A store whose author vanishes just before each write, as if another client deleted it
//! between validation and the write: what the data, conditional writes and idempotent
//! creates tiers each answer then (a 422 on `author_id`, nothing stored).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use http::Request;

use super::{TestStore, author, create, query};
use crate::api::BooksApi;
use crate::config::Config;
use crate::store::{
    BookInput, BookPage, BookRecord, BookStore, Capabilities, Conditional, ConditionalWrites,
    IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate, ListQuery, Precondition,
    StoreError,
};

/// Wraps a store: every write removes its author first. It forwards the inner store's
/// versions as they are and serves the write tiers itself (when the inner store has
/// them), as a wrapper that changes writes must.
#[derive(Debug, Clone)]
pub(super) struct VanishingAuthor<S>(pub(super) S);

#[async_trait]
impl<S: TestStore> BookStore for VanishingAuthor<S> {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        self.0.list(query).await
    }
    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        self.0.get(id).await
    }
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        self.0.remove_author(book.author_id).await?;
        self.0.create(book, now).await
    }
    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        self.0.remove_author(book.author_id).await?;
        self.0.update(id, book, now).await
    }
    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        self.0.delete(id).await
    }
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        self.0.author_exists(id).await
    }
    fn capabilities(&self) -> Capabilities<'_> {
        let inner = self.0.capabilities();
        let mut ours = Capabilities::none();
        if let Some(versions) = inner.versions() {
            ours = ours.with_versions(versions);
        }
        if let Some(tally) = inner.version_tally() {
            ours = ours.with_version_tally(tally);
        }
        if inner.conditional_writes().is_some() {
            ours = ours.with_conditional_writes(self);
        }
        if inner.idempotent_creates().is_some() {
            ours = ours.with_idempotent_creates(self);
        }
        ours
    }
}

#[async_trait]
impl<S: TestStore> ConditionalWrites for VanishingAuthor<S> {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        self.0.remove_author(book.author_id).await?;
        let inner = self.0.capabilities().conditional_writes();
        let inner = inner.expect("offered only with the inner store's");
        inner.update_if(id, book, now, precondition).await
    }
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let inner = self.0.capabilities().conditional_writes();
        let inner = inner.expect("offered only with the inner store's");
        inner.delete_if(id, precondition).await
    }
}

#[async_trait]
impl<S: TestStore> IdempotentCreates for VanishingAuthor<S> {
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        self.0.remove_author(book.author_id).await?;
        let inner = self.0.capabilities().idempotent_creates();
        let inner = inner.expect("offered only with the inner store's");
        inner.create_keyed(book, now, key).await
    }
    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let inner = self.0.capabilities().idempotent_creates();
        let inner = inner.expect("offered only with the inner store's");
        inner.idempotency_record(key, now).await
    }
    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let inner = self.0.capabilities().idempotent_creates();
        let inner = inner.expect("offered only with the inner store's");
        inner.forget_expired_keys(now, limit).await
    }
}

/// Sends each `(method, header)` write with an author that vanishes before it: a 422 on
/// `author_id` every time, and nothing stored or changed.
pub(super) async fn author_vanishing_before(
    store: &impl TestStore,
    writes: &[(&str, Option<(&str, &str)>)],
) {
    let keep = author(store, "Kept").await;
    let id = create(store, "existing", keep).await;
    let api = BooksApi::new(VanishingAuthor(store.clone()), Config::default());
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
