//! The SQLite store: WAL, foreign keys on, one writer connection beside a reader pool.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use books_core::store::{
    BookInput, BookRecord, Conditional, ConditionalWrites, KeyedCreate, Precondition, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use crate::batch::{CreateWriter, Created, Creates, NewBook};
use crate::check::{CheckSql, Checked, VersionCheck};
use crate::error::OrStoreError;
use crate::queries::{self, Read, StatementRunner, book_args};
use crate::rows::StoreRow;
use crate::statement::{Arg, Dialect, Statement};
use crate::statements::{Statements, check_sql};
use crate::transactions::{insert_all, insert_in};
use crate::{ACQUIRE_TIMEOUT, Error, migrate};

/// How long a connection waits on another process's write lock before giving up (503).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A SQLite store. Cloning is cheap (the pools are shared).
///
/// Reads go through a pool of readers; writes through one writer connection, so writers
/// in this process queue instead of failing with "database is locked". Durable by
/// default: `synchronous=FULL`, so an acknowledged write survives a power loss. Pass
/// options with `.synchronous(SqliteSynchronous::Normal)` to
/// [`connect_with`](Self::connect_with) to trade that for faster writes (WAL keeps the
/// file consistent either way; only the last writes may be lost).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    readers: SqlitePool,
    writer: SqlitePool,
    sql: Arc<Statements>,
    /// The version check, on a connection of its own when this store built its pools for
    /// a file (in memory, another connection would see a database of its own).
    check: Arc<VersionCheck<Sqlite>>,
    /// Creates waiting to be written together.
    creates: Arc<Creates>,
}

impl SqliteStore {
    /// The options this store uses for `url` (`sqlite://books.db`, `sqlite::memory:` …):
    /// create if missing, WAL, `foreign_keys=ON`, a busy timeout and `synchronous=FULL`.
    pub fn options(url: &str) -> Result<SqliteConnectOptions, Error> {
        Ok(SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT)
            .synchronous(SqliteSynchronous::Full))
    }

    /// Connects to `url` with [`options`](Self::options).
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(Self::options(url)?).await
    }

    /// Connects with explicit options. An in-memory database is one connection shared
    /// by readers and the writer (every further connection would see its own database).
    pub async fn connect_with(options: SqliteConnectOptions) -> Result<Self, Error> {
        let in_memory = options
            .get_filename()
            .to_str()
            .is_some_and(|name| name.starts_with("file:sqlx-in-memory") || name == ":memory:");
        let pool = |max: u32| {
            SqlitePoolOptions::new()
                .max_connections(max)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .test_before_acquire(false)
        };
        if in_memory {
            let single = pool(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?;
            return Ok(Self::from_pool(single));
        }
        let writer = pool(1).connect_with(options.clone()).await?;
        let readers = pool(4).connect_with(options).await?;
        Ok(Self {
            check: Arc::new(VersionCheck::new(check(), ["?1", "?2"], false, true)),
            ..Self::from_pools(writer, readers)
        })
    }

    /// A store over a pool the host already has, for reads and writes alike. Its
    /// connections need `foreign_keys=ON` (sqlx's default); WAL and a busy timeout are
    /// advised (see [`options`](Self::options)).
    pub fn from_pool(pool: SqlitePool) -> Self {
        Self::from_pools(pool.clone(), pool)
    }

    /// A store over the host's pools: writes through `writer` (best with one connection,
    /// so writers queue in process rather than on the file lock), reads and version
    /// checks through `readers`.
    pub fn from_pools(writer: SqlitePool, readers: SqlitePool) -> Self {
        Self {
            readers,
            writer,
            sql: Arc::new(Statements::new(Dialect::Sqlite, "")),
            check: Arc::new(VersionCheck::new(check(), ["?1", "?2"], false, false)),
            creates: Arc::default(),
        }
    }

    /// The pool reads go through.
    pub fn readers(&self) -> &SqlitePool {
        &self.readers
    }

    /// The pool writes go through (the same as [`readers`](Self::readers) for a store
    /// built [`from_pool`](Self::from_pool)).
    pub fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    /// The embedded migrations, recording into [`MIGRATIONS_TABLE`](crate::MIGRATIONS_TABLE):
    /// run them with your own tooling, or read each one's SQL.
    pub fn migrator() -> Migrator {
        migrate::migrator_of(migrate::SQLITE)
    }

    /// Applies the embedded migrations (call once at start; safe to repeat, and beside a
    /// host's own sqlx migrations in the same file).
    pub async fn migrate(&self) -> Result<(), Error> {
        Self::migrator().run(&self.writer).await?;
        Ok(())
    }

    /// Inserts an author with this id, or renames it if it exists.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        self.sql
            .upsert_author
            .query(&[Arg::Int(id), Arg::Name(name)])
            .execute(&self.writer)
            .await
            .or_store_error()?;
        Ok(())
    }

    /// Closes both pools.
    pub async fn close(&self) {
        self.writer.close().await;
        self.readers.close().await;
    }
}

/// The version check's statement.
fn check() -> CheckSql {
    Box::new(|above, last| check_sql("", above, last))
}

/// Reads through the readers, writes through the writer.
impl StatementRunner for SqliteStore {
    type Row = SqliteRow;

    fn sql(&self) -> &Statements {
        &self.sql
    }

    async fn read(
        &self,
        _: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<SqliteRow>, StoreError> {
        statement
            .query(args)
            .fetch_all(&self.readers)
            .await
            .or_store_error()
    }

    async fn write(
        &self,
        statement: &Statement,
        _then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<SqliteRow>, sqlx::Error> {
        statement.query(args).fetch_all(&self.writer).await
    }
}

impl CreateWriter for SqliteStore {
    async fn create_one(&self, new: &NewBook) -> Created {
        if new.key.is_none() {
            return queries::create(self, new).await;
        }
        let mut tx = self.writer.begin().await.or_store_error()?;
        let created = insert_in::<Sqlite>(&mut tx, &self.sql, true, new)
            .await
            .or_store_error()?;
        match created {
            Ok(KeyedCreate::Created(_)) => tx.commit().await.or_store_error()?,
            _ => tx.rollback().await.or_store_error()?,
        }
        created
    }

    /// One transaction of one-row inserts ([`insert_all`]).
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        let mut tx = self.writer.begin().await?;
        let created = insert_all::<Sqlite>(&mut tx, &self.sql, books).await?;
        tx.commit().await?;
        Ok(Some(created))
    }
}

impl SqliteStore {
    /// The book `id` in a transaction that holds the database's write lock from its
    /// start (`BEGIN IMMEDIATE`), so nothing changes it, or its author, before the
    /// transaction ends.
    async fn locked(
        &self,
        id: i64,
    ) -> Result<(sqlx::Transaction<'static, Sqlite>, Option<BookRecord>), StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .or_store_error()?;
        let row = self
            .sql
            .get
            .query(&[Arg::Int(id)])
            .fetch_optional(&mut *tx)
            .await
            .or_store_error()?;
        let book = row
            .map(|row| row.versioned().map(|row| row.book.map(Into::into)))
            .transpose()
            .or_store_error()?;
        Ok((tx, book.flatten()))
    }
}

impl SqliteStore {
    /// The version check's reading (see [`VersionCheck::tallied`]).
    async fn tallied(&self, above: Option<i64>) -> Result<Checked, StoreError> {
        self.check.tallied(&self.readers, above).await
    }

    /// Nothing pushes SQLite's version: the cache asks.
    fn pushed_version(&self) -> Option<u64> {
        None
    }
}

crate::tiers::sql_store!(SqliteStore);

/// Checked and written under the database's write lock (`BEGIN IMMEDIATE`).
#[async_trait::async_trait]
impl ConditionalWrites for SqliteStore {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        let (mut tx, current) = self.locked(id).await?;
        match current {
            None => return Ok(Conditional::Done(None)),
            Some(current) if !precondition(&current) => return Ok(Conditional::Refused(current)),
            Some(_) => {}
        }
        let [title, author, year, now] = book_args(book, now);
        let args = [title, author, year, now, Arg::Int(id)];
        let row = self
            .sql
            .update
            .query(&args)
            .fetch_optional(&mut *tx)
            .await
            .or_write_error(book.author_id)?;
        let updated = row.map(|row| row.book().map(Into::into)).transpose();
        let updated = updated.or_store_error()?;
        tx.commit().await.or_store_error()?;
        Ok(Conditional::Done(updated))
    }

    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let (mut tx, current) = self.locked(id).await?;
        match current {
            None => return Ok(Conditional::Done(false)),
            Some(current) if !precondition(&current) => return Ok(Conditional::Refused(current)),
            Some(_) => {}
        }
        let deleted = self
            .sql
            .delete
            .query(&[Arg::Int(id)])
            .fetch_optional(&mut *tx)
            .await
            .or_store_error()?;
        tx.commit().await.or_store_error()?;
        Ok(Conditional::Done(deleted.is_some()))
    }
}
