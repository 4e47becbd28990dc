//! The SQL store and what a database provides it: [`SqlStore`] (its parts; what it does
//! is in `store` and `tiers`), the [`Backend`] trait, sealed and implemented for sqlx's
//! SQLite, PostgreSQL and MySQL (MariaDB), and its crate-internal half, [`Engine`], whose
//! contract the compiler checks for each database. What every database does alike on a
//! connection is [`Driver`]'s.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use books_core::store::{StoreError, Version};
use sqlx::{Pool, Transaction};

use crate::Error;
use crate::batch::{Creates, NewBook};
use crate::check::VersionCheck;
use crate::driver::Driver;
use crate::list_sql::Filter;
use crate::statement::{Arg, Dialect, Statement};
use crate::store_sql::Statements;
use crate::totals::Totals;

/// Where a read may be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The data a client asked for (a page, a book): a replica may answer, as long as it
    /// has every write the primary had when the read began.
    Data,
    /// What decides a write or must be current by itself: the primary.
    Primary,
}

/// A store over SQLite ([`SqliteStore`](crate::SqliteStore)), PostgreSQL
/// ([`PostgresStore`](crate::PostgresStore)) or MariaDB ([`MySqlStore`](crate::MySqlStore)),
/// with every tier of [`books_core::store`]. Cloning is cheap (the pools are shared).
///
/// How each is built is on its alias's page; what they share: [`migrate`](Self::migrate)
/// once at start, [`pools`](Self::pools) for metrics, [`close`](Self::close) at the end.
pub struct SqlStore<DB: Backend> {
    /// Where statements go: SQLite's file, PostgreSQL's or MariaDB's servers.
    pub(crate) servers: DB::Servers,
    /// What else the store keeps for its database.
    pub(crate) extra: DB::Extra,
    /// The schema (PostgreSQL) or database (MariaDB) of the store's tables, if named.
    pub(crate) schema: Option<Arc<str>>,
    pub(crate) sql: Arc<Statements>,
    pub(crate) check: Arc<VersionCheck<DB>>,
    /// Creates waiting to be written together (one queue per set of tables).
    pub(crate) creates: Arc<Creates>,
    /// The totals of filtered lists last counted.
    pub(crate) totals: Arc<Totals<Filter>>,
}

impl<DB: Backend> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        Self {
            servers: self.servers.clone(),
            extra: self.extra.clone(),
            schema: self.schema.clone(),
            sql: self.sql.clone(),
            check: self.check.clone(),
            creates: self.creates.clone(),
            totals: self.totals.clone(),
        }
    }
}

impl<DB: Backend> std::fmt::Debug for SqlStore<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("servers", &self.servers)
            .field("extra", &self.extra)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// One of a store's pools, as its metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolState {
    /// Which pool: `sqlite_readers`, `sqlite_writer`, `postgres`, `mysql`, or
    /// `postgres_replica:HOST:PORT` (`mysql_…`) for a replica's.
    pub name: String,
    /// Connections open.
    pub size: u32,
    /// Connections open and idle.
    pub idle: u32,
    /// The most it opens.
    pub max: u32,
}

impl PoolState {
    pub(crate) fn of<DB: sqlx::Database>(name: String, pool: &sqlx::Pool<DB>) -> Self {
        let size = pool.size();
        Self {
            name,
            size,
            idle: u32::try_from(pool.num_idle()).unwrap_or(size),
            max: pool.options().get_max_connections(),
        }
    }
}

/// A database the SQL store runs on: [`sqlx::Sqlite`], [`sqlx::Postgres`] or
/// [`sqlx::MySql`] (MariaDB), each behind its feature. Sealed: what a database must do
/// for the store is this crate's business, written once per database and checked by the
/// compiler.
pub trait Backend: Engine {}

/// The store's own half of a [`Backend`]: how a database runs the store's statements and
/// transactions. Each method is one thing the databases do differently; everything they
/// share is written once over it ([`crate::queries`], [`crate::tiers`]).
pub trait Engine: Driver {
    /// Where the store sends its statements: SQLite's file (a writer and readers),
    /// PostgreSQL's and MariaDB's servers (a primary, replicas).
    type Servers: ServerSet<Self>;

    /// What else the store keeps for this database (PostgreSQL: its pooler mode and push
    /// listener).
    type Extra: Debug + Clone + Default + Send + Sync + 'static;

    /// The SQL the store speaks to it.
    const DIALECT: Dialect;

    /// Whether statements may be kept prepared on their connections (not behind a
    /// transaction pooler).
    fn persistent(_extra: &Self::Extra) -> bool {
        true
    }

    /// Runs a read; its errors are already the store contract's.
    fn read(
        store: &SqlStore<Self>,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send
    where
        Self: Backend;

    /// Runs a write (with `RETURNING`, so rows say what was written); `then`, a read in
    /// the same transaction after it, gives the rows where the database has no
    /// `RETURNING` for the write (MariaDB's `UPDATE`).
    fn write(
        store: &SqlStore<Self>,
        statement: &Statement,
        then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send
    where
        Self: Backend;

    /// A write transaction (on SQLite, one that holds the write lock from its start).
    fn begin(
        store: &SqlStore<Self>,
    ) -> impl Future<Output = Result<Transaction<'static, Self>, sqlx::Error>> + Send
    where
        Self: Backend;

    /// Runs `work` (a whole transaction, safe to send again) within the database's bounds,
    /// sending it again where the database rolled it back whole and says to retry
    /// (deadlocks, serialization failures, Galera's certification conflicts). By default,
    /// once as it is.
    fn retried<T, F, Fut>(
        _store: &SqlStore<Self>,
        work: F,
    ) -> impl Future<Output = Result<T, sqlx::Error>> + Send
    where
        T: Send,
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, sqlx::Error>> + Send,
        Self: Backend,
    {
        async move { work().await }
    }

    /// Several books in one statement, in the transaction on `conn`: the rows written (a
    /// book whose author is missing is not written).
    fn insert_many(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        books: &[NewBook],
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send
    where
        Self: Backend;

    /// Whether a batch of creates without keys is written by
    /// [`insert_alone`](Self::insert_alone) (PostgreSQL, but through a pooler) rather than
    /// in a transaction ([`insert_many`](Self::insert_many)).
    fn inserts_alone(_extra: &Self::Extra) -> bool {
        false
    }

    /// Several books without keys in one statement that commits by itself, no round
    /// trips to begin and commit: the rows written, every one of them one of the books
    /// (the statement fails whole when a host's trigger changed one, and each book is
    /// then written alone). Called only where [`inserts_alone`](Self::inserts_alone) says
    /// so; elsewhere an error.
    fn insert_alone(
        _store: &SqlStore<Self>,
        _books: &[NewBook],
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send
    where
        Self: Backend,
    {
        async {
            Err(sqlx::Error::Protocol(
                "this store writes its batches in a transaction".to_owned(),
            ))
        }
    }

    /// Whether the store can answer now and write: SQLite looks its tables up,
    /// PostgreSQL and MariaDB ask their primary its role too.
    fn ready(store: &SqlStore<Self>) -> impl Future<Output = Result<(), StoreError>> + Send
    where
        Self: Backend;

    /// The embedded migrations, as `(file name, SQL)`.
    const MIGRATIONS: &'static [(&'static str, &'static str)];

    /// Applies the embedded migrations ([`SqlStore::migrate`]).
    fn migrate(store: &SqlStore<Self>) -> impl Future<Output = Result<(), Error>> + Send
    where
        Self: Backend;

    /// The version check of the tables behind `prefix` (the schema or database `schema`).
    fn version_check(
        servers: &Self::Servers,
        extra: &Self::Extra,
        prefix: &str,
        schema: Option<&str>,
    ) -> VersionCheck<Self>;

    /// The version as the database last pushed it, while that can be trusted.
    fn pushed_version(_extra: &Self::Extra) -> Option<Version> {
        None
    }
}

/// Where a store sends its statements: its pools.
pub trait ServerSet<DB: sqlx::Database>: Debug + Clone + Send + Sync + 'static {
    /// The pool the version check reads through.
    fn check_pool(&self) -> &Pool<DB>;

    /// The pools, for metrics.
    fn pools(&self) -> Vec<PoolState>;

    /// Closes every pool.
    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Runs the version check's `work`, which reads the primary: where the set follows a
    /// cluster, as any statement on the primary runs (once its host is known; a failure
    /// that says the host is gone sends the next request looking for it).
    fn on_primary<T: Send>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        work
    }
}
