//! SQLite and PostgreSQL stores for the books API, on sqlx, with embedded migrations.
//!
//! - [`SqliteStore`] (feature `sqlite`): the embedded default, one file, nothing to install.
//! - [`PostgresStore`] (feature `postgres`): many stateless API processes over one database,
//!   directly or behind a transaction-mode pooler, reading from streaming replicas as
//!   well; optionally in [`push`] mode, where the database notifies writes and cached
//!   reads query nothing.
//!
//! Both implement [`books_core::BookStore`] and [`books_core::AuthorStore`] and pass the
//! shared conformance suite. Both are built the same ways: `connect(url)`,
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
//! Migrations record their versions in [`MIGRATIONS_TABLE`], not in sqlx's default
//! `_sqlx_migrations`, so they live beside a host's own sqlx migrations in one database.
//! A host that runs migrations with other tooling takes our SQL from `migrator()`
//! (each migration's `sql`) or from this crate's `migrations/` folder.

mod batch;
mod check;
mod error;
mod migrate;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
pub mod push;
mod queries;
mod rows;
#[cfg(feature = "sqlite")]
mod sqlite_store;

pub use error::Error;
pub use migrate::MIGRATIONS_TABLE;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::{
    DEFAULT_REPLICA_WAIT, DOWN_FOR, PROBE_INTERVAL, PostgresStore, ReplicaState, STATEMENT_TIMEOUT,
};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite_store::{BUSY_TIMEOUT, SqliteStore};
pub use sqlx;

/// How long a request waits for a pooled connection before the store answers "unavailable".
pub const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
