//! The data tier over `catalogue` and `writers`: every query maps the host's names to the
//! API's (`label AS title`); the rest is the rules of [`BookStore`].

use async_trait::async_trait;
use books_core::store::{
    BookInput, BookPage, BookRecord, BookStore, Capabilities, ListQuery, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteConnection, SqlitePool};

/// A book joined with its writer, in the API's names; `$rest` is the query's tail.
macro_rules! book {
    ($rest:literal) => {
        concat!(
            "SELECT c.item_no, c.label, c.pub_year, c.writer_no, w.full_name, c.added, c.changed \
             FROM catalogue c LEFT JOIN writers w ON w.writer_no = c.writer_no ",
            $rest
        )
    };
}

/// The store, over the host's pool.
#[derive(Debug, Clone)]
pub struct CatalogueStore {
    /// The host's pool.
    pub pool: SqlitePool,
}

impl CatalogueStore {
    /// A store over the host's pool; the host installed [`crate::versions::VERSION`].
    pub fn new(pool: SqlitePool) -> Self {
        Self { pool }
    }
}

/// A row of [`book!`], in its order.
type Row = (i64, String, i32, Option<i64>, Option<String>, DateTime<Utc>, DateTime<Utc>);

/// A row of [`book!`] as the API's record.
fn record((id, title, year, author_id, author_name, created_at, updated_at): Row) -> BookRecord {
    BookRecord { id, title, year, author_id, author_name, created_at, updated_at }
}

/// Driver errors as the API's (books-sqlx's classification: 503 for what a retry may
/// cure, 500 for the rest).
pub(crate) fn failed(error: sqlx::Error) -> StoreError {
    books_sqlx::store_error(error, None)
}

/// `sql` with a book's fields bound: `?1` title, `?2` writer, `?3` year, `?4` now.
fn with_book<'q>(
    sql: &'static str,
    new: &'q BookInput,
    now: DateTime<Utc>,
) -> Query<'q, Sqlite, SqliteArguments> {
    let query = sqlx::query(sql).bind(&new.title).bind(new.author_id);
    query.bind(new.year).bind(now)
}

/// A page and the total, on `conn` (inside a transaction, both are one snapshot).
pub(crate) async fn page(
    conn: &mut SqliteConnection,
    query: &ListQuery,
) -> Result<BookPage, sqlx::Error> {
    let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
    let rows = sqlx::query_as::<_, Row>(book!("ORDER BY c.item_no LIMIT ?1 OFFSET ?2"));
    let rows = rows.bind(i64::from(query.limit)).bind(offset).fetch_all(&mut *conn);
    let books = rows.await?.into_iter().map(record).collect();
    let total = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM catalogue");
    let total = total.fetch_one(&mut *conn).await? as u64;
    Ok(BookPage { books, total })
}

/// Inserts `new` on `conn`: its id, or none if its writer is missing (the legacy tables
/// have no foreign key: the write itself checks the writer).
pub(crate) async fn insert(
    conn: &mut SqliteConnection,
    new: &BookInput,
    now: DateTime<Utc>,
) -> Result<Option<i64>, sqlx::Error> {
    let insert = "INSERT INTO catalogue (label, writer_no, pub_year, added, changed) \
        SELECT ?1, ?2, ?3, ?4, ?4 WHERE EXISTS (SELECT 1 FROM writers WHERE writer_no = ?2) \
        RETURNING item_no";
    let row = with_book(insert, new, now).fetch_optional(conn).await?;
    Ok(row.map(|row| sqlx::Row::get(&row, 0)))
}

/// One book on `conn`.
pub(crate) async fn book(
    conn: &mut SqliteConnection,
    id: i64,
) -> Result<Option<BookRecord>, sqlx::Error> {
    let row = sqlx::query_as::<_, Row>(book!("WHERE c.item_no = ?1")).bind(id);
    Ok(row.fetch_optional(conn).await?.map(record))
}

#[async_trait]
impl BookStore for CatalogueStore {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        let mut tx = self.pool.begin().await.map_err(failed)?;
        page(&mut tx, query).await.map_err(failed)
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        book(&mut conn, id).await.map_err(failed)
    }

    /// The legacy tables have no foreign key: the write itself checks the writer.
    async fn create(&self, new: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        let id = insert(&mut *self.pool.acquire().await.map_err(failed)?, new, now).await;
        let id = id.map_err(failed)?.ok_or(StoreError::AuthorNotFound(new.author_id))?;
        let written = self.get(id).await?;
        written.ok_or_else(|| StoreError::other("the created book vanished"))
    }

    async fn update(
        &self,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        let update = "UPDATE catalogue SET label = ?1, writer_no = ?2, pub_year = ?3, \
            changed = ?4 WHERE item_no = ?5 AND EXISTS (SELECT 1 FROM writers WHERE writer_no = ?2)";
        let updated = with_book(update, new, now).bind(id).execute(&self.pool).await;
        let updated = updated.map_err(failed)?;
        // Nothing written: no such book, or no such writer.
        match (updated.rows_affected(), self.get(id).await?) {
            (0, Some(_)) => Err(StoreError::AuthorNotFound(new.author_id)),
            (_, book) => Ok(book),
        }
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        let deleted = sqlx::query("DELETE FROM catalogue WHERE item_no = ?1").bind(id);
        let deleted = deleted.execute(&self.pool).await.map_err(failed)?;
        Ok(deleted.rows_affected() > 0)
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        let exists =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM writers WHERE writer_no = ?1)");
        exists.bind(id).fetch_one(&self.pool).await.map_err(failed)
    }

    /// The data tier, the versions tier of [`crate::versions`] and the idempotent-creates
    /// tier of [`crate::keys`].
    fn capabilities(self: std::sync::Arc<Self>) -> Capabilities<Self> {
        Capabilities::of(self).versions().idempotent_creates()
    }
}
