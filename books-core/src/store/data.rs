//! The data tier: the seed's operations, which every store implements.

use std::error::Error as StdError;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Capabilities, ListQuery};

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
    /// The books on the page, in the list's order.
    pub books: Vec<BookRecord>,
    /// How many books the list holds in all (not only this page).
    pub total: u64,
}

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or timed out; the client may retry (503 with
    /// `Retry-After`). Use it for whatever a retry may cure: a refused or lost
    /// connection, a pool or lock wait that timed out, a statement cancelled by its time
    /// bound, a database that is starting, read-only or shutting down.
    #[error("store unavailable")]
    Unavailable(#[source] BoxError),
    /// The author named by a write does not exist (any more) (422 on `author_id`).
    #[error("author {0} does not exist")]
    AuthorNotFound(i64),
    /// Any other failure (500). The message goes to the log, never to a client.
    #[error("store failure")]
    Other(#[source] BoxError),
}

/// Why a store cannot answer now, for a readiness probe to name: a store that follows a
/// cluster says it as the source of its [`StoreError::Unavailable`] while it has no
/// primary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unready {
    /// A server answered, but none has the role the store wants (by default one that
    /// takes writes; `&'static str` names it): a failover under way, or the store
    /// pointed at standbys only.
    #[error("no server is {0} (the servers that answer are not)")]
    WrongRole(&'static str),
    /// No server answered.
    #[error("no server answers")]
    Unreachable,
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

/// The data tier: books and whether an author exists. Every store implements it, and
/// with it alone the API serves the whole contract (without a cache of rendered answers,
/// and with a 501 for `If-Match` and `Idempotency-Key`, which need the
/// [capability tiers](super#tiers)).
///
/// The rules every store keeps:
///
/// 1. A book is joined with its author: [`BookRecord::author_name`] is the author's name
///    as it is now, `None` without an author or a name. Removing an author leaves its
///    books with no author (`author_id: None`).
/// 2. Ids are `1..=i64::MAX`, handed out in increasing order and never reused, even after
///    a delete.
/// 3. Reads see every write acknowledged before they started, whoever made it.
/// 4. A write whose author does not exist when it applies fails with
///    [`StoreError::AuthorNotFound`] and writes nothing (the API leaves that check to the
///    write).
/// 5. Failures a retry may cure are [`StoreError::Unavailable`] (503), anything else
///    [`StoreError::Other`] (500); neither message ever reaches a client.
///
/// Methods are async (`#[async_trait]`, so a store needs the `async-trait` crate) and the
/// API holds the store as `Arc<dyn BookStore>`. The data tier of the conformance suite
/// (`books_core::testing`, feature `testing`) checks every rule.
///
/// ```
/// use books_core::store::{BookInput, BookPage, BookRecord, BookStore, Capabilities, ListQuery, StoreError};
/// use chrono::{DateTime, Utc};
/// use std::sync::Mutex;
///
/// /// Books in a vector, one author (id 1): the smallest store there is.
/// #[derive(Debug, Default)]
/// struct Shelf(Mutex<(Vec<BookRecord>, i64)>);
///
/// #[async_trait::async_trait]
/// impl BookStore for Shelf {
///     async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
///         let shelf = self.0.lock().unwrap();
///         let skip = usize::try_from(query.offset).unwrap_or(usize::MAX);
///         let books = shelf.0.iter().skip(skip).take(query.limit as usize).cloned().collect();
///         Ok(BookPage { books, total: shelf.0.len() as u64 })
///     }
///     async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
///         Ok(self.0.lock().unwrap().0.iter().find(|b| b.id == id).cloned())
///     }
///     async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
///         if book.author_id != 1 {
///             return Err(StoreError::AuthorNotFound(book.author_id));
///         }
///         let mut shelf = self.0.lock().unwrap();
///         shelf.1 += 1;
///         let record = BookRecord {
///             id: shelf.1, title: book.title.clone(), year: book.year, author_id: Some(1),
///             author_name: Some("Ann".into()), created_at: now, updated_at: now,
///         };
///         shelf.0.push(record.clone());
///         Ok(record)
///     }
///     async fn update(&self, id: i64, book: &BookInput, now: DateTime<Utc>) -> Result<Option<BookRecord>, StoreError> {
///         let mut shelf = self.0.lock().unwrap();
///         let Some(stored) = shelf.0.iter_mut().find(|b| b.id == id) else { return Ok(None) };
///         if book.author_id != 1 {
///             return Err(StoreError::AuthorNotFound(book.author_id));
///         }
///         (stored.title, stored.year, stored.updated_at) = (book.title.clone(), book.year, now);
///         Ok(Some(stored.clone()))
///     }
///     async fn delete(&self, id: i64) -> Result<bool, StoreError> {
///         let mut shelf = self.0.lock().unwrap();
///         let before = shelf.0.len();
///         shelf.0.retain(|b| b.id != id);
///         Ok(shelf.0.len() < before)
///     }
///     async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
///         Ok(id == 1)
///     }
///     fn capabilities(self: std::sync::Arc<Self>) -> Capabilities<Self> {
///         Capabilities::of(self)
///     }
/// }
/// # let api = books_core::BooksApi::new(Shelf::default(), books_core::Config::default());
/// ```
#[async_trait]
pub trait BookStore: Debug + Send + Sync + 'static {
    /// The books `query` asks for, each joined with its author, in the list's order (by
    /// id ascending for a [plain](ListQuery::is_plain) query), and how many books the list
    /// holds in all. Paging happens in the store: one query for the page, never a lookup
    /// per book. An offset past the end yields no books and the true total. A store is
    /// asked to filter and sort only if it names the
    /// [list queries tier](super::ListQueries).
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError>;

    /// The book with this id joined with its author, or `None`.
    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError>;

    /// Stores a new book with `created_at = updated_at = now` and returns it as
    /// [`get`](Self::get) would. Its id is greater than every id handed out before. If the
    /// author does not exist when the write applies: [`StoreError::AuthorNotFound`].
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError>;

    /// Replaces title, author and year and sets `updated_at = now`, keeping `created_at`,
    /// and returns the book as [`get`](Self::get) would; `None` if no book has this id. A
    /// missing author: [`StoreError::AuthorNotFound`].
    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError>;

    /// Deletes the book; `false` if no book has this id.
    async fn delete(&self, id: i64) -> Result<bool, StoreError>;

    /// Whether an author with this id exists (one indexed lookup).
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError>;

    /// Whether the store can answer now, for a readiness probe:
    /// [`StoreError::Unavailable`] when it cannot. The default asks
    /// [`author_exists`](Self::author_exists) about id 0: one round trip through the
    /// store's own tables.
    async fn ready(&self) -> Result<(), StoreError> {
        self.author_exists(0).await.map(drop)
    }

    /// The capability tiers this store implements (`Capabilities::of(self)` for the data
    /// tier alone), asked once when the API is built. Required, so that every store,
    /// a wrapper of another included, says which tiers it has; typed by the store, so it
    /// names only tiers the store implements itself (see [`Capabilities`]).
    fn capabilities(self: Arc<Self>) -> Capabilities<Self>
    where
        Self: Sized;
}

/// Writing authors: for hosts, demo data and tests. The API itself never writes authors.
#[async_trait]
pub trait AuthorStore: Send + Sync {
    /// Adds an author (the name may be null) and returns its new id.
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError>;

    /// Removes an author; books that named it keep existing with no author
    /// (`author_id` becomes `None`). Returns `false` if no author has this id.
    async fn remove_author(&self, id: i64) -> Result<bool, StoreError>;
}
