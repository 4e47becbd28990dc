//! The SQLite store: WAL, foreign keys on, one writer connection beside a reader pool.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use books_core::{AuthorStore, BookInput, BookPage, BookRecord, BookStore, StoreError};
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::store_error;
use crate::{ACQUIRE_TIMEOUT, BookRow, Error, PageRow, page, record, select_books};

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
            return Ok(Self {
                readers: single.clone(),
                writer: single,
            });
        }
        let writer = pool(1).connect_with(options.clone()).await?;
        let readers = pool(4).connect_with(options).await?;
        Ok(Self { readers, writer })
    }

    /// Applies the embedded migrations (call once at start; safe to repeat).
    pub async fn migrate(&self) -> Result<(), Error> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.writer)
            .await?;
        Ok(())
    }

    /// Inserts an author with this id, or renames it if it exists.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO authors (id, name) VALUES (?, ?) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name",
        )
        .bind(id)
        .bind(name)
        .execute(&self.writer)
        .await
        .map_err(|e| store_error(e, None))?;
        Ok(())
    }

    /// Closes both pools.
    pub async fn close(&self) {
        self.writer.close().await;
        self.readers.close().await;
    }
}

#[async_trait]
impl BookStore for SqliteStore {
    async fn list(&self, offset: u64, limit: u32) -> Result<BookPage, StoreError> {
        let rows: Vec<PageRow> = sqlx::query_as(select_books!(
            ", (SELECT n FROM book_count) \
             FROM books b LEFT JOIN authors a ON a.id = b.author_id \
             ORDER BY b.id LIMIT ? OFFSET ?"
        ))
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(&self.readers)
        .await
        .map_err(|e| store_error(e, None))?;
        let (books, total) = page(rows);
        let total = match total {
            Some(total) => total,
            None => sqlx::query_scalar::<_, i64>("SELECT n FROM book_count")
                .fetch_one(&self.readers)
                .await
                .map_err(|e| store_error(e, None))? as u64,
        };
        Ok(BookPage { books, total })
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        let row: Option<BookRow> = sqlx::query_as(select_books!(
            " FROM books b LEFT JOIN authors a ON a.id = b.author_id WHERE b.id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.readers)
        .await
        .map_err(|e| store_error(e, None))?;
        Ok(row.map(record))
    }

    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<i64, StoreError> {
        sqlx::query_scalar(
            "INSERT INTO books (title, author_id, year, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&book.title)
        .bind(book.author_id)
        .bind(book.year)
        .bind(now)
        .bind(now)
        .fetch_one(&self.writer)
        .await
        .map_err(|e| store_error(e, Some(book.author_id)))
    }

    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE books SET title = ?, author_id = ?, year = ?, updated_at = ? WHERE id = ?",
        )
        .bind(&book.title)
        .bind(book.author_id)
        .bind(book.year)
        .bind(now)
        .bind(id)
        .execute(&self.writer)
        .await
        .map_err(|e| store_error(e, Some(book.author_id)))?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM books WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
            .await
            .map_err(|e| store_error(e, None))?;
        Ok(done.rows_affected() == 1)
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM authors WHERE id = ?)")
            .bind(id)
            .fetch_one(&self.readers)
            .await
            .map_err(|e| store_error(e, None))
    }
}

#[async_trait]
impl AuthorStore for SqliteStore {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        sqlx::query_scalar("INSERT INTO authors (name) VALUES (?) RETURNING id")
            .bind(name)
            .fetch_one(&self.writer)
            .await
            .map_err(|e| store_error(e, None))
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM authors WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
            .await
            .map_err(|e| store_error(e, None))?;
        Ok(done.rows_affected() == 1)
    }
}
