//! SQLite, PostgreSQL and MariaDB stores for the books API, on sqlx, with embedded
//! migrations.
//!
//! - [`SqliteStore`] (feature `sqlite`): the embedded default, one file, nothing to install.
//! - [`PostgresStore`] (feature `postgres`): many stateless API processes over one database,
//!   directly or behind a transaction-mode pooler, reading from streaming replicas as
//!   well; optionally in [`push`] mode, where the database notifies writes and cached
//!   reads query nothing.
//! - [`MySqlStore`] (feature `mysql`): the same over MariaDB, reading from GTID replicas;
//!   no push mode.
//!
//! Each implements every tier of [`books_core::store`] (the data tier, versions with their
//! tally, conditional writes, idempotent creates) and
//! [`AuthorStore`](books_core::store::AuthorStore), and passes the shared conformance
//! suite. All are built the same ways: `connect(url)`,
//! `connect_with(options)`, or `from_pool(pool)` over a pool the host already has; then
//! `migrate()` once at start:
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use books_core::{BooksApi, Config};
//! let store = books_sqlx::SqliteStore::connect("sqlite::memory:").await?;
//! store.migrate().await?;
//! let api = BooksApi::new(store, Config::default());
//! # let _ = api;
//! # Ok::<_, books_sqlx::Error>(())
//! # }).unwrap();
//! ```
//!
//! A store with every tier over a host's own tables, on any of the three databases, is
//! a [`HostStore`]: the host gives its column names and its own insert, update and
//! delete ([`HostWrites`]). Where it needs more, it builds on the parts `HostStore` is
//! made of: [`BookTables`] (a book, a page and its total, a book locked for a
//! conditional write, from the host's column names) with [`snapshot`],
//! [`VersionTriggers`] (the versions tier), [`KeyRecords`] (idempotent creates),
//! [`ListClauses`] (a filter and sort for statements of the host's own),
//! [`retry_conflicts`] and [`store_error`]. The repository's `docs/stores.md` walks
//! through one.
//!
//! Migrations record their versions in [`MIGRATIONS_TABLE`], not in sqlx's default
//! `_sqlx_migrations`, so they live beside a host's own sqlx migrations in one database.
//! A host that runs migrations with other tooling takes our SQL from `migrator()`
//! (each migration's `sql`) or from this crate's `migrations/` folder.

#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a database's feature there is no store: what they share is unused.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code, unused_imports, unused_macros)
)]

/// The crate's README (what crates.io shows), its examples compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod any;
mod backend;
mod batch;
mod book_tables;
mod check;
mod creates;
mod driver;
mod error;
mod host_store;
mod host_tiers;
mod key_records;
mod key_sql;
mod lineage;
mod list_sql;
mod migrate;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
mod queries;
mod retry;
mod rows;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod servers;
#[cfg(feature = "sqlite")]
mod sqlite;
mod statement;
mod store;
mod store_sql;
mod tiers;
mod totals;
mod transactions;
mod version_triggers;
#[cfg(all(target_os = "linux", feature = "sqlite"))]
mod wal_index;

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub use any::{AnyStore, StoreSettings};
pub use backend::Backend;
pub use backend::{PoolState, SqlStore};
pub use book_tables::{AuthorColumns, BookTables, snapshot};
pub use error::{Error, is_unavailable, store_error};
pub use host_store::{HostAuthors, HostStore, HostWrites};
pub use key_records::KeyRecords;
pub use list_sql::{BookColumns, ListClauses, ListValue};
pub use migrate::MIGRATIONS_TABLE;
#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
pub use mysql::MySqlStore;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::{PostgresStore, push};
pub use retry::{CONFLICT_TRIES, is_conflict, retry_conflicts};
pub use rows::BookRow;
#[cfg(any(feature = "postgres", feature = "mysql"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "postgres", feature = "mysql"))))]
pub use servers::replicas::{
    DEFAULT_WAIT as DEFAULT_REPLICA_WAIT, DOWN_FOR, PROBE_INTERVAL, ReplicaState,
};
#[cfg(any(feature = "postgres", feature = "mysql"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "postgres", feature = "mysql"))))]
pub use servers::{PROBE_TIMEOUT, RETRY_AFTER, Role, SessionAttrs};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::{BUSY_TIMEOUT, SqliteStore};
pub use sqlx;
pub use statement::Dialect;
pub use version_triggers::VersionTriggers;

/// The longest a single statement may run before the database cancels it (503), on the
/// PostgreSQL and MariaDB stores' own connections.
pub const STATEMENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest the PostgreSQL and MariaDB stores wait for the primary to finish one
/// piece of work on their own pools, counting the wait for a search and for a pooled
/// connection (a statement, or a transaction with its retries): the database's own
/// bound ([`STATEMENT_TIMEOUT`]) and a second. Past it the request is "unavailable"
/// (503), and the host is taken as lost: its connections are dropped and the next
/// request looks for the primary again. A server cut off by the network answers
/// nothing, and this bound, not TCP's (many minutes), decides how long a request waits
/// for it; a primary so busy that work overruns it is looked for again too. The cached
/// pages' version check bounds itself: its own connection within [`ACQUIRE_TIMEOUT`],
/// after any check already under way. A create waits at most this long in all, behind
/// the creates written before it too (on SQLite as well).
pub const PRIMARY_TIMEOUT: std::time::Duration =
    STATEMENT_TIMEOUT.saturating_add(std::time::Duration::from_secs(1));

/// How long a request waits for a pooled connection before the store answers "unavailable".
pub const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
