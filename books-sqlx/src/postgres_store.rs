//! The PostgreSQL store: one pool, lazy connections, a statement timeout, an optional
//! schema of its own.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use books_core::{AuthorStore, BookInput, BookPage, BookRecord, BookStore, StoreError};
use chrono::{DateTime, Utc};
use sqlx::AssertSqlSafe;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::batch::{self, Created, Creates, NewBook, Write};
use crate::check::{self, CheckConnection};
use crate::error::OrStoreError;
use crate::push::{self, Push};
use crate::rows::{BookRow, LIST_POSTGRES, PageRow, RANGE, Statements, VersionedRow, page};
use crate::{ACQUIRE_TIMEOUT, Error, migrate};

/// The longest a single statement may run before PostgreSQL cancels it (503).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A PostgreSQL store. Cloning is cheap (the pool is shared).
///
/// Connections are opened lazily: a store built while the server is down answers
/// "unavailable" (503) and recovers by itself once the server is back. Its tables can
/// live in a schema of their own ([`in_schema`](Self::in_schema)), so a host's own
/// `books` or `authors` tables never collide with them.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    schema: Option<Arc<str>>,
    sql: Arc<Statements>,
    /// The push listener, when [`listening`](Self::listening).
    push: Option<Arc<Push>>,
    /// The version check's own connection, when this store built its pool.
    check: Option<Arc<CheckConnection<sqlx::Postgres>>>,
    /// Creates waiting to be written together (one queue per set of tables).
    creates: Arc<Creates>,
}

impl PostgresStore {
    /// The options this store uses for `url` (`postgres://user@host/db`): a statement
    /// timeout of [`STATEMENT_TIMEOUT`] and times stored as UTC.
    pub fn options(url: &str) -> Result<PgConnectOptions, Error> {
        let timeout = format!("{}ms", STATEMENT_TIMEOUT.as_millis());
        Ok(PgConnectOptions::from_str(url)?
            .options([("statement_timeout", timeout.as_str()), ("timezone", "UTC")]))
    }

    /// Connects to `url` with [`options`](Self::options), failing if the server is down.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(Self::options(url)?).await
    }

    /// Connects with explicit options, failing if the server is down.
    pub async fn connect_with(options: PgConnectOptions) -> Result<Self, Error> {
        Ok(Self::from_own_pool(
            pool_options().connect_with(options).await?,
        ))
    }

    /// A store for `url` with [`options`](Self::options); connects on first use.
    pub fn connect_lazy(url: &str) -> Result<Self, Error> {
        Ok(Self::connect_lazy_with(Self::options(url)?))
    }

    /// A store with explicit options; connects on first use.
    pub fn connect_lazy_with(options: PgConnectOptions) -> Self {
        Self::from_own_pool(pool_options().connect_lazy_with(options))
    }

    /// A store over a pool the host already has. Its connections keep the host's
    /// settings (no statement timeout unless the host sets one); version checks go
    /// through it as well.
    pub fn from_pool(pool: PgPool) -> Self {
        Self {
            pool,
            schema: None,
            sql: Arc::new(Statements::new(LIST_POSTGRES, "")),
            push: None,
            check: None,
            creates: Arc::default(),
        }
    }

    /// A store over a pool it built from options alone: its version check gets a
    /// connection of its own.
    fn from_own_pool(pool: PgPool) -> Self {
        Self {
            check: Some(Arc::default()),
            ..Self::from_pool(pool)
        }
    }

    /// This store with its tables in `schema` (created by [`migrate`](Self::migrate)),
    /// whatever the connections' `search_path`. Names are 1 to 63 of `a-z`, `0-9` and
    /// `_`, not starting with a digit.
    pub fn in_schema(self, schema: &str) -> Result<Self, Error> {
        let valid = (1..=63).contains(&schema.len())
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(Error::InvalidSchema(schema.to_owned()));
        }
        let store = Self {
            sql: Arc::new(Statements::new(LIST_POSTGRES, &format!("{schema}."))),
            schema: Some(schema.into()),
            pool: self.pool,
            push: None,
            check: self.check,
            creates: Arc::default(),
        };
        // A listener follows the tables it was started for.
        Ok(if self.push.is_some() {
            store.listening()
        } else {
            store
        })
    }

    /// This store with a push listener (a tokio task on one connection of its own, opened
    /// with the pool's options; call inside a tokio runtime). While push mode is on for the database
    /// ([`set_push`](Self::set_push)) and the listener is connected, the API's cache takes
    /// the version the listener last read ([`BookStore::known_version`]) instead of
    /// asking per request: cached reads cost no query, but may be as old as the
    /// staleness bound in [`push`](crate::push) (typically one notification and one round
    /// trip; at most [`HEARTBEAT`](push::HEARTBEAT) plus
    /// [`PROBE_TIMEOUT`](push::PROBE_TIMEOUT) when a connection dies silently). Otherwise
    /// the cache asks, exactly as without a listener. The listener stops when the last
    /// clone of the store is dropped or the pool is closed.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it spawns the listener's task).
    pub fn listening(self) -> Self {
        let state = push::state_sql(&self.sql_schema());
        Self {
            push: Some(Arc::new(Push::start(&self.pool, state))),
            ..self
        }
    }

    /// Turns push mode on or off for the database — every process and every writer,
    /// the host's own SQL included — by attaching or dropping the `books_notify`
    /// triggers (needs the right to alter the tables), and tells listeners at once.
    /// Every write then notifies: PostgreSQL commits notifying transactions one at a
    /// time, so writes slow down (BENCHMARKS.md measures by how much); it suits
    /// read-mostly deployments. Safe to repeat.
    pub async fn set_push(&self, on: bool) -> Result<(), Error> {
        let s = self.sql_schema();
        let mut tx = self.pool.begin().await?;
        for table in ["books", "authors"] {
            // Safe: `s` is empty or a checked identifier and a dot.
            let ddl = if on {
                format!(
                    "CREATE OR REPLACE TRIGGER books_notify \
                     AFTER INSERT OR UPDATE OR DELETE ON {s}{table} \
                     FOR EACH STATEMENT EXECUTE FUNCTION {s}books_notify()"
                )
            } else {
                format!("DROP TRIGGER IF EXISTS books_notify ON {s}{table}")
            };
            sqlx::query(AssertSqlSafe(ddl)).execute(&mut *tx).await?;
        }
        sqlx::query("SELECT pg_notify($1, 'push')")
            .bind(push::CHANNEL)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The schema and a dot, or nothing: what goes before a table's name.
    fn sql_schema(&self) -> String {
        self.schema
            .as_deref()
            .map(|schema| format!("{schema}."))
            .unwrap_or_default()
    }

    /// The schema of the store's tables, if one was named.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The embedded migrations, recording into [`MIGRATIONS_TABLE`](crate::MIGRATIONS_TABLE)
    /// of the first schema on the `search_path`: run them with your own tooling (after
    /// `SET search_path TO <schema>` for a schema of their own), or read each one's SQL.
    pub fn migrator() -> Migrator {
        migrate::ours(sqlx::migrate!("./migrations/postgres"))
    }

    /// Applies the embedded migrations (call once at start; safe to repeat, to run from
    /// several processes at once, and beside a host's own sqlx migrations). They run on a
    /// connection of their own, so a host's pool keeps its `search_path`.
    pub async fn migrate(&self) -> Result<(), Error> {
        let mut options = (*self.pool.connect_options()).clone();
        let mut migrator = Self::migrator();
        if let Some(schema) = &self.schema {
            migrator.create_schema(schema.to_string());
            options = options.options([("search_path", &**schema)]);
        }
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        let mut conn = pool.acquire().await?;
        migrate::postgres::adopt_legacy(&mut conn, &migrator).await?;
        drop(conn);
        migrator.run(&pool).await?;
        pool.close().await;
        Ok(())
    }

    /// Inserts an author with this id, or renames it if it exists; later
    /// [`add_author`](AuthorStore::add_author) ids continue after the largest id.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.or_store_error()?;
        sqlx::query(self.sql.upsert_author.clone())
            .bind(id)
            .bind(name)
            .execute(&mut *tx)
            .await
            .or_store_error()?;
        // A checked identifier (`in_schema`), or none: nothing to inject.
        let authors = format!("{}authors", self.sql_schema());
        sqlx::query(AssertSqlSafe(format!(
            "SELECT setval(pg_get_serial_sequence('{authors}', 'id'), \
             GREATEST((SELECT MAX(id) FROM {authors}), 1))"
        )))
        .execute(&mut *tx)
        .await
        .or_store_error()?;
        tx.commit().await.or_store_error()
    }

    /// The pool, for embedders that keep their own tables beside ours.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl Write for PostgresStore {
    async fn create_one(&self, new: &NewBook) -> Created {
        let row: BookRow = sqlx::query_as(self.sql.create.clone())
            .bind(&new.book.title)
            .bind(new.book.author_id)
            .bind(new.book.year)
            .bind(new.now)
            .fetch_one(&self.pool)
            .await
            .or_write_error(new.book.author_id)?;
        Ok(row.into())
    }

    /// One statement in a transaction, committed once every row is attributed to its
    /// book ([`batch::attribute`]).
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        let (mut titles, mut authors, mut years, mut times) = (vec![], vec![], vec![], vec![]);
        for new in books {
            titles.push(new.book.title.as_str());
            authors.push(new.book.author_id);
            years.push(new.book.year);
            times.push(new.now);
        }
        let mut tx = self.pool.begin().await?;
        let rows: Vec<BookRow> = sqlx::query_as(self.sql.create_many.clone())
            .bind(titles)
            .bind(authors)
            .bind(years)
            .bind(times)
            .fetch_all(&mut *tx)
            .await?;
        let Some(created) = batch::attribute(books, rows.into_iter().map(Into::into).collect())
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        tx.commit().await?;
        Ok(Some(created))
    }
}

/// No ping before each checkout (a round trip per request): a connection that died fails
/// its query once (503) and is dropped; the next checkout opens a fresh one.
fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
}

#[async_trait]
impl BookStore for PostgresStore {
    async fn list(&self, offset: u64, limit: u32) -> Result<BookPage, StoreError> {
        // Past the first range, start from the page's range (`book_ranges`).
        let sql = if offset < RANGE {
            &self.sql.list
        } else {
            &self.sql.deep
        };
        let rows: Vec<PageRow> = sqlx::query_as(sql.clone())
            .bind(i64::from(limit))
            .bind(i64::try_from(offset).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .or_store_error()?;
        let (books, tally) = page(rows);
        let (total, version) = match tally {
            Some(tally) => tally,
            None => sqlx::query_as::<_, (i64, i64)>(self.sql.tally.clone())
                .fetch_one(&self.pool)
                .await
                .or_store_error()?,
        };
        Ok(BookPage {
            books,
            total: total as u64,
            version: Some(version as u64),
        })
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        Ok(self.get_versioned(id).await?.0)
    }

    async fn get_versioned(
        &self,
        id: i64,
    ) -> Result<(Option<BookRecord>, Option<u64>), StoreError> {
        let row: Option<VersionedRow> = sqlx::query_as(self.sql.get.clone())
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .or_store_error()?;
        Ok(match row {
            Some(row) => (Some(row.book.into()), Some(row.version as u64)),
            None => (None, None),
        })
    }

    /// Creates that arrive while another is written go together in one statement
    /// (group commit: the README's "Creates commit together").
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        let book = NewBook {
            book: book.clone(),
            now,
        };
        self.creates.create(self, book).await
    }

    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        let row: Option<BookRow> = sqlx::query_as(self.sql.update.clone())
            .bind(&book.title)
            .bind(book.author_id)
            .bind(book.year)
            .bind(now)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .or_write_error(book.author_id)?;
        Ok(row.map(BookRecord::from))
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(self.sql.delete.clone())
            .bind(id)
            .execute(&self.pool)
            .await
            .or_store_error()?;
        Ok(done.rows_affected() == 1)
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        sqlx::query_scalar(self.sql.author_exists.clone())
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .or_store_error()
    }

    async fn version(&self) -> Result<Option<u64>, StoreError> {
        let version = check::version(self.check.as_deref(), &self.pool, &self.sql.version).await?;
        Ok(Some(version as u64))
    }

    /// While [`listening`](Self::listening) in push mode: the version the listener last read.
    fn known_version(&self) -> Option<u64> {
        self.push.as_ref().and_then(|push| push.known())
    }

    /// Looks up author 0 through the store's own table and index: one round trip that
    /// fails when the database or the migrated schema is missing.
    async fn ready(&self) -> Result<(), StoreError> {
        self.author_exists(0).await.map(drop)
    }
}

#[async_trait]
impl AuthorStore for PostgresStore {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        sqlx::query_scalar(self.sql.add_author.clone())
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .or_store_error()
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(self.sql.remove_author.clone())
            .bind(id)
            .execute(&self.pool)
            .await
            .or_store_error()?;
        Ok(done.rows_affected() == 1)
    }
}
