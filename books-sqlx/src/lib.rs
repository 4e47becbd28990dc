//! SQLite and PostgreSQL stores for the books API, on sqlx, with embedded migrations.
//!
//! - [`SqliteStore`] (feature `sqlite`): the embedded default, one file, nothing to install.
//! - [`PostgresStore`] (feature `postgres`): many stateless API processes over one database.
//!
//! Both implement [`books_core::BookStore`] and [`books_core::AuthorStore`] and pass the
//! shared conformance suite. Connect, then call `migrate()` once at start:
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

mod error;
#[cfg(feature = "postgres")]
mod postgres_store;
#[cfg(feature = "sqlite")]
mod sqlite_store;

use books_core::BookRecord;
use chrono::{DateTime, Utc};

pub use error::Error;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres_store::{PostgresStore, STATEMENT_TIMEOUT};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite_store::{BUSY_TIMEOUT, SqliteStore};
pub use sqlx;

/// How long a request waits for a pooled connection before the store answers "unavailable".
pub const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A query over the books-with-authors join: the columns in `BookRow` order, then the
/// rest of the statement. A `&'static str` built at compile time, so a request neither
/// formats SQL nor hands sqlx's statement cache a fresh string.
macro_rules! select_books {
    ($($rest:literal),+ $(,)?) => {
        concat!(
            "SELECT b.id, b.title, b.year, b.author_id, a.name, b.created_at, b.updated_at",
            $($rest),+
        )
    };
}
pub(crate) use select_books;

/// One row of the join, as sqlx decodes it.
type BookRow = (
    i64,
    String,
    i32,
    Option<i64>,
    Option<String>,
    DateTime<Utc>,
    DateTime<Utc>,
);

/// A row of a page: the join and the total from the counter, in one round trip.
type PageRow = (
    i64,
    String,
    i32,
    Option<i64>,
    Option<String>,
    DateTime<Utc>,
    DateTime<Utc>,
    i64,
);

/// The books of a page and the total its rows carry (`None` for an empty page).
fn page(rows: Vec<PageRow>) -> (Vec<BookRecord>, Option<u64>) {
    let total = rows.first().map(|row| row.7 as u64);
    let books = rows
        .into_iter()
        .map(|(id, title, year, author_id, name, created, updated, _)| {
            record((id, title, year, author_id, name, created, updated))
        })
        .collect();
    (books, total)
}

fn record(row: BookRow) -> BookRecord {
    let (id, title, year, author_id, author_name, created_at, updated_at) = row;
    BookRecord {
        id,
        title,
        year,
        author_id,
        author_name,
        created_at,
        updated_at,
    }
}
