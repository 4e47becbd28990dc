//! The SQLite store: WAL, foreign keys on, one writer connection beside a reader pool.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use books_core::{
    BookInput, BookRecord, Guarded, KeyedCreate, Precondition, StoreError, VersionReading,
};
use chrono::{DateTime, Utc};
use sqlx::SqlStr;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use crate::batch::{Created, Creates, NewBook, Write};
use crate::check::{Check, CheckSql};
use crate::error::OrStoreError;
use crate::queries::{self, Arg, Read, Run, bind, book_args, insert_in};
use crate::rows::{LIST_SQLITE, NO_POSITION, Statements, StoreRow, check_sql};
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
    check: Arc<Check<Sqlite>>,
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
            check: Arc::new(Check::new(check(), ["?1", "?2"], false, true)),
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
            sql: Arc::new(Statements::new(LIST_SQLITE, "")),
            check: Arc::new(Check::new(check(), ["?1", "?2"], false, false)),
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
        migrate::ours(migrate::SQLITE)
    }

    /// Applies the embedded migrations (call once at start; safe to repeat, and beside a
    /// host's own sqlx migrations in the same file).
    pub async fn migrate(&self) -> Result<(), Error> {
        let migrator = Self::migrator();
        let mut conn = self.writer.acquire().await?;
        migrate::sqlite::adopt_legacy(&mut conn, &migrator).await?;
        drop(conn);
        migrator.run(&self.writer).await?;
        Ok(())
    }

    /// Inserts an author with this id, or renames it if it exists.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        sqlx::query(self.sql.upsert_author.clone())
            .bind(id)
            .bind(name)
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
    Box::new(|above, last| check_sql("", NO_POSITION, above, last))
}

/// Reads through the readers, writes through the writer.
impl Run for SqliteStore {
    type Row = SqliteRow;

    fn sql(&self) -> &Statements {
        &self.sql
    }

    async fn read(
        &self,
        _: Read,
        sql: &SqlStr,
        args: &[Arg<'_>],
    ) -> Result<Vec<SqliteRow>, StoreError> {
        bind(sqlx::query(sql.clone()), args)
            .fetch_all(&self.readers)
            .await
            .or_store_error()
    }

    async fn write(&self, sql: &SqlStr, args: &[Arg<'_>]) -> Result<Vec<SqliteRow>, sqlx::Error> {
        bind(sqlx::query(sql.clone()), args)
            .fetch_all(&self.writer)
            .await
    }
}

impl Write for SqliteStore {
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

    /// One transaction of one-row inserts: a failed statement (a missing author) is
    /// undone alone and the transaction goes on; a keyed create whose key turns out
    /// taken is undone alone too (a savepoint around it).
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        let mut tx = self.writer.begin().await?;
        let mut created = Vec::with_capacity(books.len());
        for new in books {
            let keyed = new.key.is_some();
            if keyed {
                sqlx::raw_sql("SAVEPOINT keyed").execute(&mut *tx).await?;
            }
            let outcome = insert_in::<Sqlite>(&mut tx, &self.sql, true, new).await?;
            if keyed {
                let undo = !matches!(outcome, Ok(KeyedCreate::Created(_)));
                let end = if undo {
                    "ROLLBACK TO keyed; RELEASE keyed"
                } else {
                    "RELEASE keyed"
                };
                sqlx::raw_sql(end).execute(&mut *tx).await?;
            }
            created.push(outcome);
        }
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
        let row = bind(sqlx::query(self.sql.get.clone()), &[Arg::Int(id)])
            .fetch_optional(&mut *tx)
            .await
            .or_store_error()?;
        let book = row
            .map(|row| row.versioned().map(|row| row.book.into()))
            .transpose()
            .or_store_error()?;
        Ok((tx, book))
    }
}

queries::sql_store!(SqliteStore {
    async fn version(&self) -> Result<Option<u64>, StoreError> {
        let checked = self.check.run(&self.readers, None).await?;
        Ok(Some(checked.version as u64))
    }

    async fn check_version(&self, above: i64) -> Result<Option<VersionReading>, StoreError> {
        Ok(Some(self.check.run(&self.readers, Some(above)).await?.reading()))
    }

    /// Checked and written under the database's write lock.
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Guarded<Option<BookRecord>>, StoreError> {
        let (mut tx, current) = self.locked(id).await?;
        match current {
            None => return Ok(Guarded::Done(None)),
            Some(current) if !precondition(&current) => return Ok(Guarded::Refused(current)),
            Some(_) => {}
        }
        let [title, author, year, now] = book_args(book, now);
        let args = [title, author, year, now, Arg::Int(id)];
        let row = bind(sqlx::query(self.sql.update.clone()), &args)
            .fetch_optional(&mut *tx)
            .await
            .or_write_error(book.author_id)?;
        let updated = row.map(|row| row.book().map(Into::into)).transpose();
        let updated = updated.or_store_error()?;
        tx.commit().await.or_store_error()?;
        Ok(Guarded::Done(updated))
    }

    /// Checked and deleted under the database's write lock.
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Guarded<bool>, StoreError> {
        let (mut tx, current) = self.locked(id).await?;
        match current {
            None => return Ok(Guarded::Done(false)),
            Some(current) if !precondition(&current) => return Ok(Guarded::Refused(current)),
            Some(_) => {}
        }
        let deleted = bind(sqlx::query(self.sql.delete.clone()), &[Arg::Int(id)])
            .fetch_optional(&mut *tx)
            .await
            .or_store_error()?;
        tx.commit().await.or_store_error()?;
        Ok(Guarded::Done(deleted.is_some()))
    }
});
