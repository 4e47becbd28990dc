//! The SQLite store: WAL, foreign keys on, one writer connection beside a reader pool.

use std::str::FromStr;
use std::time::Duration;

use books_core::store::StoreError;
use chrono::SecondsFormat;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool,
    SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Pool, Transaction};

use crate::backend::Read;
use crate::backend::{Backend, Engine, ServerSet};
use crate::backend::{PoolState, SqlStore};
use crate::batch::{self, NewBook};
use crate::check::VersionCheck;
use crate::driver::Driver;
use crate::error::OrStoreError;
use crate::statement::{Arg, Dialect, Statement};
use crate::{ACQUIRE_TIMEOUT, Error, migrate};

/// How long a connection waits on another process's write lock before giving up (503).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A SQLite store (feature `sqlite`). Cloning is cheap (the pools are shared).
///
/// Reads go through a pool of readers; writes through one writer connection, so writers
/// in this process queue instead of failing with "database is locked". Durable by
/// default: `synchronous=FULL`, so an acknowledged write survives a power loss. Pass
/// options with `.synchronous(SqliteSynchronous::Normal)` to
/// [`connect_with`](SqlStore::connect_with) to trade that for faster writes (WAL keeps
/// the file consistent either way; only the last writes may be lost). A store that
/// opened its file in WAL mode knows its version without a query while nothing was
/// committed (the WAL index's header; docs/stores.md).
pub type SqliteStore = SqlStore<Sqlite>;

/// SQLite's file: the writer, the readers, and whether the store opened them.
#[derive(Debug, Clone)]
pub struct Files {
    writer: SqlitePool,
    readers: SqlitePool,
    /// The version check runs on a connection of its own (a file this store opened; in
    /// memory, another connection would see a database of its own).
    own: bool,
}

impl Backend for Sqlite {}

impl ServerSet<Sqlite> for Files {
    fn check_pool(&self) -> &Pool<Sqlite> {
        &self.readers
    }

    fn pools(&self) -> Vec<PoolState> {
        vec![
            PoolState::of("sqlite_readers".into(), &self.readers),
            PoolState::of("sqlite_writer".into(), &self.writer),
        ]
    }

    async fn close(&self) {
        self.writer.close().await;
        self.readers.close().await;
    }
}

impl Engine for Sqlite {
    type Servers = Files;
    type Extra = ();
    const DIALECT: Dialect = Dialect::Sqlite;
    const MIGRATIONS: &'static [(&'static str, &'static str)] = migrate::SQLITE;

    async fn read(
        store: &SqliteStore,
        _to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<SqliteRow>, StoreError> {
        books_core::trace::store_answered_by("sqlite", "primary", None);
        let mut conn = store.servers.readers.acquire().await.or_store_error()?;
        Sqlite::rows(&mut conn, statement, args, true)
            .await
            .or_store_error()
    }

    async fn write(
        store: &SqliteStore,
        statement: &Statement,
        _then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<SqliteRow>, sqlx::Error> {
        books_core::trace::store_answered_by("sqlite", "primary", None);
        let mut conn = store.servers.writer.acquire().await?;
        Sqlite::rows(&mut conn, statement, args, true).await
    }

    /// Every write transaction holds the database's write lock from its start (`BEGIN
    /// IMMEDIATE`): nothing changes a book it checks before it ends, and a writer in
    /// another process makes it wait out the busy timeout (deferred, batches of creates
    /// from two stores on one file failed with "database is locked" in 5 of 40 runs of
    /// `two_stores_on_one_file_never_report_locked`; 0 of 60 so).
    async fn begin(store: &SqliteStore) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        store.servers.writer.begin_with("BEGIN IMMEDIATE").await
    }

    /// One statement (the books as a JSON array, `json_each`), each time written as
    /// sqlx writes one bound alone, so a batch's rows read back as a lone create's.
    async fn insert_many(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        books: &[NewBook],
    ) -> Result<Vec<SqliteRow>, sqlx::Error> {
        let json = batch::as_json(books, |at| at.to_rfc3339_opts(SecondsFormat::AutoSi, false));
        let args = [Arg::Text(&json)];
        let rows = Sqlite::rows(conn, &store.sql.books.create_many, &args, true).await?;
        Ok(rows)
    }

    /// One look-up through the store's own tables.
    async fn ready(store: &SqliteStore) -> Result<(), StoreError> {
        crate::queries::author_exists(store, 0).await.map(drop)
    }

    async fn migrate(store: &SqliteStore) -> Result<(), Error> {
        SqliteStore::migrator().run(&store.servers.writer).await?;
        Ok(())
    }

    fn version_check(
        files: &Files,
        _extra: &(),
        prefix: &str,
        _schema: Option<&str>,
    ) -> VersionCheck<Sqlite> {
        let check = VersionCheck::new(Dialect::Sqlite, prefix, "", None, files.own.then_some(None));
        #[cfg(target_os = "linux")]
        if files.own {
            let options = files.readers.connect_options();
            if let Some(index) = crate::wal_index::WalIndex::new(options.get_filename()) {
                return check.with_wal_index(index);
            }
        }
        check
    }
}

/// Building a SQLite store.
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
        Ok(Self::files(writer, readers, true))
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
        Self::files(writer, readers, false)
    }

    fn files(writer: SqlitePool, readers: SqlitePool, own: bool) -> Self {
        let files = Files {
            writer,
            readers,
            own,
        };
        Self::assemble(files, (), None)
    }

    /// The pool reads go through.
    pub fn readers(&self) -> &SqlitePool {
        &self.servers.readers
    }

    /// The pool writes go through (the same as [`readers`](Self::readers) for a store
    /// built [`from_pool`](Self::from_pool)).
    pub fn writer(&self) -> &SqlitePool {
        &self.servers.writer
    }
}
