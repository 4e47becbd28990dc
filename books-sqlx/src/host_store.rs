//! A store over a host's own tables with every tier ([`HostStore`]): this crate's parts
//! put together, so that a host writes only its column names and its own three writes
//! ([`HostWrites`]).

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use books_core::store::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, Capabilities, ListQueries, ListQuery,
    StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::{Pool, Transaction};

use crate::backend::Backend;
use crate::book_tables::{BookTables, snapshot};
use crate::key_records::KeyRecords;
use crate::statement::Dialect;
use crate::version_triggers::VersionTriggers;
use crate::{Error, store_error};

/// A host's writes to its books table, each one statement of its own SQL on `conn`
/// (inside a transaction the [`HostStore`] begins, commits and, on a conflict, sends
/// again). The API's rules around them (reading the book back, 404 and 422, the
/// precondition, the key's record) are the store's; the host's writes keep these:
///
/// - never begin, commit or roll back on `conn`, and give the driver's errors back as
///   they are (a conflict is sent again, a foreign-key violation is a 422): a method may
///   run more than once for one request;
/// - ids only increase and are never reused (SQLite: `AUTOINCREMENT`);
/// - the author is checked and held to the commit: a foreign key, or a locking read
///   (SQLite's `BEGIN IMMEDIATE` holds everything; on PostgreSQL an `EXISTS` alone
///   locks nothing, so a removed author's books would keep it);
/// - `created_at` is set once, `updated_at` by every write, both to `now`.
#[async_trait]
pub trait HostWrites<DB: Backend>: Debug + Send + Sync + 'static {
    /// Inserts `new`, written at `now`, if its author exists: its id, or none if there
    /// is no such author.
    async fn insert(
        &self,
        conn: &mut DB::Connection,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, sqlx::Error>;

    /// Writes `new` over the book `id` at `now`, if its author exists: whether a row
    /// matched (sqlx counts matched rows on all three databases, MariaDB included), so
    /// false for no such book or no such author.
    async fn update(
        &self,
        conn: &mut DB::Connection,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error>;

    /// Deletes the book `id`: whether there was one.
    async fn delete(&self, conn: &mut DB::Connection, id: i64) -> Result<bool, sqlx::Error>;

    /// Whether the author `id` exists.
    async fn author_exists(&self, conn: &mut DB::Connection, id: i64) -> Result<bool, sqlx::Error>;
}

/// A host's writes to its authors table, for demo data and the suites' authors
/// ([`AuthorStore`]); a [`HostStore`] whose writes have them is an `AuthorStore` too.
#[async_trait]
pub trait HostAuthors<DB: Backend>: HostWrites<DB> {
    /// Adds an author named `name` (or nameless): its id.
    async fn add_author(
        &self,
        conn: &mut DB::Connection,
        name: Option<&str>,
    ) -> Result<i64, sqlx::Error>;

    /// Removes the author `id`, leaving its books without one: whether there was one.
    async fn remove_author(&self, conn: &mut DB::Connection, id: i64) -> Result<bool, sqlx::Error>;
}

/// A store with every tier over a host's own tables: reads by [`BookTables`], the
/// version (and, when kept, the tally) by [`VersionTriggers`], idempotency keys by
/// [`KeyRecords`], the host's writes by its [`HostWrites`]. Pages and their totals are
/// one [`snapshot`]; conditional writes hold the book ([`BookTables::locked`]) from the
/// check to the commit; every write is one transaction (SQLite's `BEGIN IMMEDIATE`),
/// sent again on a deadlock or certification conflict
/// ([`retry_conflicts`](crate::retry_conflicts)). The host installs the triggers and the
/// keys' table beside its own migrations. Cloning is cheap.
///
/// Where a host needs other reads or transactions than these, the parts are public:
/// this type is a few hundred lines over them.
pub struct HostStore<DB: Backend, W> {
    pub(crate) pool: Pool<DB>,
    pub(crate) parts: Arc<Parts<DB, W>>,
}

/// What a [`HostStore`] is made of.
pub(crate) struct Parts<DB: Backend, W> {
    pub(crate) tables: BookTables<DB>,
    pub(crate) version: VersionTriggers<DB>,
    pub(crate) keys: KeyRecords<DB>,
    pub(crate) writes: W,
}

impl<DB: Backend, W: HostWrites<DB>> HostStore<DB, W> {
    /// The store over `pool`: `tables` to read; `version` on the same books table,
    /// `also` its authors' (a rename moves the version) and `with_tally` on the id
    /// column, and `keys`, both installed by the host (`install` or `statements()`);
    /// `writes` the host's own.
    pub fn new(
        pool: Pool<DB>,
        tables: BookTables<DB>,
        version: VersionTriggers<DB>,
        keys: KeyRecords<DB>,
        writes: W,
    ) -> Self {
        let parts = Parts {
            tables,
            version,
            keys,
            writes,
        };
        Self {
            pool,
            parts: Arc::new(parts),
        }
    }

    /// The host's pool.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// The host's writes.
    pub fn writes(&self) -> &W {
        &self.parts.writes
    }

    /// A write transaction: SQLite's `BEGIN IMMEDIATE` (the write lock from the start, so
    /// a read in it is never a snapshot a commit elsewhere outdates), else `BEGIN`.
    pub(crate) async fn write(&self) -> Result<Transaction<'static, DB>, Error> {
        Ok(match DB::DIALECT {
            Dialect::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            _ => self.pool.begin().await?,
        })
    }

    /// `new` inserted on `tx` and read back, or [`StoreError::AuthorNotFound`].
    pub(crate) async fn inserted(
        &self,
        tx: &mut DB::Connection,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Result<BookRecord, StoreError>, Error> {
        let inserted = self.parts.writes.insert(tx, new, now).await;
        let Some(Some(id)) = unless_author_refused(inserted)? else {
            return Ok(Err(StoreError::AuthorNotFound(new.author_id)));
        };
        let written = self.parts.tables.book(tx, id).await?;
        Ok(written.ok_or_else(|| StoreError::other("the inserted book is not there")))
    }

    /// `new` written over the book `id` on `tx`, and the book as written: none if there
    /// is no such book, [`StoreError::AuthorNotFound`] if there is no such author.
    pub(crate) async fn updated(
        &self,
        tx: &mut DB::Connection,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Result<Option<BookRecord>, StoreError>, Error> {
        let written = self.parts.writes.update(tx, id, new, now).await;
        let Some(written) = unless_author_refused(written)? else {
            return Ok(Err(StoreError::AuthorNotFound(new.author_id)));
        };
        let book = self.parts.tables.book(tx, id).await?;
        // No row matched a book that is there: its author is missing.
        if book.is_some() && !written {
            return Ok(Err(StoreError::AuthorNotFound(new.author_id)));
        }
        Ok(Ok(book))
    }
}

/// A host's write as it went, or none if the database refused its author by a foreign
/// key (an author removed by a transaction the write waited for): the write then ends
/// in [`StoreError::AuthorNotFound`], rolled back.
fn unless_author_refused<T>(written: Result<T, sqlx::Error>) -> Result<Option<T>, Error> {
    match written {
        Err(sqlx::Error::Database(db)) if db.is_foreign_key_violation() => Ok(None),
        written => Ok(Some(written?)),
    }
}

/// Ends `tx` as `end` says: the outcome once committed, or the answer (dropping `tx`
/// rolls it back). Inside [`retry_conflicts`](crate::retry_conflicts), with the
/// statements before it.
pub(crate) async fn finish<DB: Backend, T>(
    tx: Transaction<'static, DB>,
    end: End<T>,
) -> Result<Result<T, StoreError>, Error> {
    Ok(match end {
        End::Commit(done) => tx.commit().await.map(|()| Ok(done))?,
        End::RollBack(answer) => answer,
    })
}

/// How a write transaction ends: committed with its outcome, or rolled back with the
/// answer.
pub(crate) enum End<T> {
    Commit(T),
    RollBack(Result<T, StoreError>),
}

impl<T> From<Result<T, StoreError>> for End<T> {
    /// Committed if done, rolled back if refused.
    fn from(outcome: Result<T, StoreError>) -> Self {
        match outcome {
            Ok(done) => Self::Commit(done),
            Err(refused) => Self::RollBack(Err(refused)),
        }
    }
}

impl<DB: Backend, W> Clone for HostStore<DB, W> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            parts: self.parts.clone(),
        }
    }
}

impl<DB: Backend, W: Debug> Debug for HostStore<DB, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostStore")
            .field("tables", &self.parts.tables)
            .field("writes", &self.parts.writes)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<DB: Backend, W: HostWrites<DB>> BookStore for HostStore<DB, W> {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        let mut tx = snapshot(&self.pool).await?;
        Ok(self.parts.tables.page(&mut tx, query).await?)
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(self.parts.tables.book(&mut conn, id).await?)
    }

    async fn create(&self, new: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        in_write!(self, |tx| self.inserted(tx, new, now).await?.into())
    }

    async fn update(
        &self,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        in_write!(self, |tx| self.updated(tx, id, new, now).await?.into())
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        in_write!(self, |tx| End::Commit(
            self.parts.writes.delete(tx, id).await?
        ))
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        self.parts
            .writes
            .author_exists(&mut conn, id)
            .await
            .map_err(failed)
    }

    /// Every tier: the version's tally only if [`VersionTriggers::with_tally`] keeps it.
    fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
        let tally = self.parts.version.tallies();
        let tiers = Capabilities::of(self).versions();
        let tiers = if tally { tiers.version_tally() } else { tiers };
        tiers
            .conditional_writes()
            .idempotent_creates()
            .list_queries()
    }
}

impl<DB: Backend, W: HostWrites<DB>> ListQueries for HostStore<DB, W> {}

#[async_trait]
impl<DB: Backend, W: HostAuthors<DB>> AuthorStore for HostStore<DB, W> {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        in_write!(self, |tx| End::Commit(
            self.parts.writes.add_author(tx, name).await?
        ))
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        in_write!(self, |tx| End::Commit(
            self.parts.writes.remove_author(tx, id).await?
        ))
    }
}

/// `$body` (an [`End`] written over `$tx`, the connection, with `?` for this crate's
/// [`Error`]) in a write transaction of its own ([`HostStore::write`]), committed or
/// rolled back as the `End` says, the whole sent again on a conflict
/// ([`retry_conflicts`](crate::retry_conflicts)): the `T`, or the store's error. A macro,
/// not a function taking an async closure: the future of one that borrows its argument
/// is not `Send` for every lifetime, which `async_trait` needs.
macro_rules! in_write {
    ($store:expr, |$tx:ident| $body:expr) => {
        $crate::retry::retry_conflicts(|| async {
            let mut tx = $store.write().await?;
            let $tx = &mut *tx;
            let end = $body;
            $crate::host_store::finish(tx, end).await
        })
        .await?
    };
}
pub(crate) use in_write;

/// A driver error as the API's.
pub(crate) fn failed(error: sqlx::Error) -> StoreError {
    store_error(error, None)
}
