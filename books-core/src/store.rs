//! The storage contract every store implements.

use std::error::Error as StdError;
use std::fmt::Debug;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A book as stored, joined with its author.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookRecord {
    /// The book's id, `1..=i64::MAX`, never reused.
    pub id: i64,
    /// The title as validated (trimmed).
    pub title: String,
    /// The publication year.
    pub year: i32,
    /// The author's id; `None` when the book has none (e.g. its author was removed).
    pub author_id: Option<i64>,
    /// The author's name from the join; `None` when there is no author or no name.
    pub author_name: Option<String>,
    /// When the book was created (UTC, whole seconds).
    pub created_at: DateTime<Utc>,
    /// When the book was last written (UTC, whole seconds).
    pub updated_at: DateTime<Utc>,
}

/// A validated book to create or update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookInput {
    /// Title, 1..=255 characters, no control characters.
    pub title: String,
    /// A positive author id; whether the author exists is checked by the write.
    pub author_id: i64,
    /// Year, `2000..=` the current year.
    pub year: i32,
}

/// One page of books and the total number of books.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BookPage {
    /// The books on the page, ordered by id ascending.
    pub books: Vec<BookRecord>,
    /// How many books the store holds in all.
    pub total: u64,
    /// The store's [`version`](BookStore::version) the page was read at, from the same
    /// round trip; `None` when the store does not read it with the page (the API then
    /// does not reuse the answer).
    pub version: Option<u64>,
}

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or timed out; the client may retry (503).
    #[error("store unavailable")]
    Unavailable(#[source] BoxError),
    /// The author named by a write does not exist (any more) (422 on `author_id`).
    #[error("author {0} does not exist")]
    AuthorNotFound(i64),
    /// Any other failure (500). The message goes to the log, never to a client.
    #[error("store failure")]
    Other(#[source] BoxError),
}

impl StoreError {
    /// Wraps an error that means the store is unreachable or timed out.
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        Self::Unavailable(error.into())
    }

    /// Wraps any other store failure.
    pub fn other(error: impl Into<BoxError>) -> Self {
        Self::Other(error.into())
    }
}

/// Async, object-safe storage of books; the API holds it as `Arc<dyn BookStore>`.
///
/// Every store passes the conformance suite in `books_core::testing` (feature `testing`).
#[async_trait]
pub trait BookStore: Debug + Send + Sync + 'static {
    /// Up to `limit` books ordered by id ascending, skipping the first `offset`, each
    /// joined with its author, and the total count. Paging happens in the store: one
    /// query for the page, never a per-book lookup. An offset past the end yields no
    /// books and the true total.
    async fn list(&self, offset: u64, limit: u32) -> Result<BookPage, StoreError>;

    /// The book with this id joined with its author, or `None`.
    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError>;

    /// [`get`](Self::get), and the [`version`](Self::version) the book was read at from
    /// the same round trip (`None` for a missing book, or when the store does not read
    /// it with the data: the API then does not reuse the answer). The default has none;
    /// a store that wraps another should forward this as well as `get`.
    async fn get_versioned(
        &self,
        id: i64,
    ) -> Result<(Option<BookRecord>, Option<u64>), StoreError> {
        Ok((self.get(id).await?, None))
    }

    /// Stores a new book with `created_at = updated_at = now` and returns it as
    /// [`get`](Self::get) would (ideally in the same round trip). Its id is greater than
    /// every id handed out before (ids are never reused, even after delete). If the
    /// author does not exist at write time: [`StoreError::AuthorNotFound`] (the API
    /// leaves that check to this call).
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError>;

    /// Replaces title, author and year and sets `updated_at = now`, keeping `created_at`,
    /// and returns the book as [`get`](Self::get) would; `None` if no book has this id.
    /// A missing author: [`StoreError::AuthorNotFound`].
    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError>;

    /// Deletes the book; returns `false` if no book has this id.
    async fn delete(&self, id: i64) -> Result<bool, StoreError>;

    /// Whether an author with this id exists (one indexed lookup).
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError>;

    /// A value that changes with every committed write to books or authors, whoever
    /// makes it (this process, another one, a host's own SQL), in one cheap round trip:
    /// equal values mean unchanged data. `None`: the store keeps no version. Stores that
    /// pass the conformance suite keep one.
    async fn version(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// The [`version`](Self::version) without a round trip, when this process knows it
    /// already: kept in memory (exact), or pushed by the database (PostgreSQL's push
    /// mode while its listener is connected: current within the store's documented
    /// staleness bound). The API's cache then trusts it instead of asking. `None` (the
    /// default): ask [`version`](Self::version). A store that wraps another should
    /// forward this.
    fn known_version(&self) -> Option<u64> {
        None
    }

    /// Whether the store can answer now: one cheap round trip to the database (a
    /// readiness probe), [`StoreError::Unavailable`] when it cannot. Stores without a
    /// remote part keep the default, which is always ready.
    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Writing authors: for embedders, demo data and tests. The API itself never writes authors.
#[async_trait]
pub trait AuthorStore: Send + Sync {
    /// Adds an author (the name may be null) and returns its new id.
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError>;

    /// Removes an author; books that named it keep existing with no author
    /// (`author_id` becomes `None`). Returns `false` if no author has this id.
    async fn remove_author(&self, id: i64) -> Result<bool, StoreError>;
}
