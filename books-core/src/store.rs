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

/// A version check's reading ([`BookStore::check_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionReading {
    /// The store's [`version`](BookStore::version).
    pub version: u64,
    /// How the books stood at the same snapshot, so a cache can tell creates from other
    /// writes; `None` when the store does not say (every write then counts as a change).
    pub books: Option<BooksTally>,
}

/// What a cache needs to keep pages across creates, read in the version's snapshot.
///
/// Between two readings `a` and `b` (`b.above` = `a.max_id`), only books with ids above
/// `a.max_id` were added and nothing else was written exactly when
/// `b.changes == a.changes` and `b.count_above == b.total - a.total`: then every book
/// up to `a.max_id`, and its place in the list, is as it was. A store that cannot keep
/// `changes` so (every write but an insert of books moves it, whoever writes) must
/// answer `None` in [`VersionReading::books`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BooksTally {
    /// Moves with every committed write to books or authors except inserts of books.
    pub changes: u64,
    /// How many books there are.
    pub total: u64,
    /// The greatest book id, 0 when there is none.
    pub max_id: i64,
    /// The id asked about ([`BookStore::check_version`]'s `above`).
    pub above: i64,
    /// How many books have an id greater than `above`.
    pub count_above: u64,
}

impl BooksTally {
    /// Whether `self`, read after `earlier` with `above = earlier.max_id`, differs from
    /// it only by books added with ids above `earlier.max_id` (see the type's doc).
    pub fn only_appended_since(&self, earlier: &BooksTally) -> bool {
        self.above == earlier.max_id
            && self.changes == earlier.changes
            && self.total >= earlier.total
            && self.count_above == self.total - earlier.total
    }
}

/// What a conditional write ([`BookStore::update_if`], [`BookStore::delete_if`])
/// requires of the book as it is when the write applies: `true` lets the write go on.
/// The API's is "one of `If-Match`'s tags is the book's current `ETag`".
pub type Precondition<'a> = &'a (dyn Fn(&BookRecord) -> bool + Send + Sync);

/// The outcome of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guarded<T> {
    /// The write's own outcome: done, or no such book (the precondition was not asked).
    Done(T),
    /// The book exists and the precondition refused it: nothing changed. The book as it
    /// was when refused (its `ETag` goes into the 412).
    Refused(BookRecord),
}

/// An answer kept for an idempotency key, replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    /// The status (201).
    pub status: u16,
    /// `Content-Type`, in the format first answered.
    pub content_type: String,
    /// `Location`.
    pub location: String,
    /// `ETag`.
    pub etag: String,
    /// The body.
    pub body: Vec<u8>,
}

/// What a store keeps for an idempotency key: the request's fingerprint and the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The fingerprint of the request that used the key first.
    pub fingerprint: Vec<u8>,
    /// The answer it got.
    pub answer: StoredAnswer,
}

/// Renders the answer to keep for the book a keyed create wrote; the store calls it
/// inside the write's transaction.
pub type Answer = std::sync::Arc<dyn Fn(&BookRecord) -> StoredAnswer + Send + Sync>;

/// A create's idempotency key and what to keep with it (in the book's transaction).
#[derive(Clone)]
pub struct IdempotencyKey {
    /// The key (1 to 255 visible ASCII characters), global to the store.
    pub key: String,
    /// The request's fingerprint.
    pub fingerprint: Vec<u8>,
    /// When the record may be forgotten.
    pub expires_at: DateTime<Utc>,
    /// The answer to keep, rendered from the written book.
    pub answer: Answer,
}

impl std::fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyKey")
            .field("key", &self.key)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// The outcome of a keyed create ([`BookStore::create_keyed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyedCreate {
    /// The book, written with the key's record.
    Created(BookRecord),
    /// A record for the key was committed first (another request, another process):
    /// nothing was written. Read it with [`BookStore::idempotency_record`].
    Taken,
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

    /// [`update`](Self::update), if `precondition` holds for the book as it is when the
    /// write applies: the check and the write are one atomic step (a row lock in the
    /// write's transaction, or the like), so of concurrent conditional writes that expect
    /// the same book exactly one goes on, whatever other processes or a host's SQL write
    /// meanwhile (the author's name included: it shows in the book's answers).
    /// `Done(None)`: no book has this id.
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Guarded<Option<BookRecord>>, StoreError>;

    /// [`delete`](Self::delete), if `precondition` holds, atomically as
    /// [`update_if`](Self::update_if). `Done(false)`: no book has this id.
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Guarded<bool>, StoreError>;

    /// [`create`](Self::create), and `key`'s record (its fingerprint and the answer
    /// `key.answer` renders from the written book) in the same transaction: both are
    /// stored or neither. [`KeyedCreate::Taken`] when an unexpired record for the key
    /// was committed first (a record that expired is replaced); a concurrent write of
    /// the same key waits for the first to commit or roll back.
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError>;

    /// The record kept for `key`, unless it expired at or before `now`.
    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;

    /// Forgets at most `limit` records that expired at or before `now`; how many.
    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError>;

    /// Whether an author with this id exists (one indexed lookup).
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError>;

    /// A value that changes with every committed write to books or authors, whoever
    /// makes it (this process, another one, a host's own SQL), in one cheap round trip:
    /// equal values mean unchanged data. `None`: the store keeps no version. Stores that
    /// pass the conformance suite keep one.
    async fn version(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// [`version`](Self::version), and with it, in the same snapshot, the books' tally
    /// ([`BooksTally`]) counting books with ids greater than `above` (pass `i64::MAX` when
    /// there is nothing to compare with). The default reads the version alone; a store
    /// that wraps another should forward this as well as `version`.
    async fn check_version(&self, above: i64) -> Result<Option<VersionReading>, StoreError> {
        let _ = above;
        Ok(self.version().await?.map(|version| VersionReading {
            version,
            books: None,
        }))
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
