//! The data tier over `catalogue` and `writers`: the reads are books-sqlx's
//! [`BookTables`], written from the host's column names; the writes are the host's own
//! SQL; the rest is the rules of [`BookStore`].

use std::sync::LazyLock;

use async_trait::async_trait;
use books_core::store::{
    BookInput, BookPage, BookRecord, BookStore, Capabilities, ListQueries, ListQuery, StoreError,
};
use books_sqlx::{AuthorColumns, BookColumns, BookTables};
use chrono::{DateTime, Utc};
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteConnection, SqlitePool};

/// The host's tables in the API's names: a book, a page and its total (the list's filter
/// and sort included), a book locked for a conditional write.
pub static TABLES: LazyLock<BookTables<Sqlite>> = LazyLock::new(|| {
    let columns = BookColumns {
        id: "c.item_no",
        title: "c.label",
        year: "c.pub_year",
        author_id: "c.writer_no",
        created_at: "c.added",
        updated_at: "c.changed",
        folded_title: None,
    };
    let writers = AuthorColumns { table: "writers w", id: "w.writer_no", name: "w.full_name" };
    BookTables::new("catalogue c", columns, writers)
});

/// The store, over the host's pool.
#[derive(Debug, Clone)]
pub struct CatalogueStore {
    /// The host's pool.
    pub pool: SqlitePool,
}

impl CatalogueStore {
    /// A store over the host's pool; the host installed [`crate::versions::VERSION`] and
    /// [`crate::keys::KEYS`].
    pub fn new(pool: SqlitePool) -> Self {
        Self { pool }
    }
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

/// Writes `new` over the book `id` on `conn`: the book as written, or none if there is
/// no such book.
pub(crate) async fn update(
    conn: &mut SqliteConnection,
    id: i64,
    new: &BookInput,
    now: DateTime<Utc>,
) -> Result<Option<BookRecord>, StoreError> {
    let update = "UPDATE catalogue SET label = ?1, writer_no = ?2, pub_year = ?3, \
        changed = ?4 WHERE item_no = ?5 AND EXISTS (SELECT 1 FROM writers WHERE writer_no = ?2)";
    let updated = with_book(update, new, now).bind(id).execute(&mut *conn).await;
    let updated = updated.map_err(failed)?;
    // Nothing written: no such book, or no such writer.
    match (updated.rows_affected(), TABLES.book(conn, id).await?) {
        (0, Some(_)) => Err(StoreError::AuthorNotFound(new.author_id)),
        (_, book) => Ok(book),
    }
}

/// Deletes the book `id` on `conn`; whether there was one.
pub(crate) async fn delete(conn: &mut SqliteConnection, id: i64) -> Result<bool, StoreError> {
    let deleted = sqlx::query("DELETE FROM catalogue WHERE item_no = ?1").bind(id);
    Ok(deleted.execute(conn).await.map_err(failed)?.rows_affected() > 0)
}

#[async_trait]
impl BookStore for CatalogueStore {
    /// The page and its total in one snapshot.
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        let mut tx = books_sqlx::snapshot(&self.pool).await?;
        Ok(TABLES.page(&mut tx, query).await?)
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(TABLES.book(&mut conn, id).await?)
    }

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
        update(&mut *self.pool.acquire().await.map_err(failed)?, id, new, now).await
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        delete(&mut *self.pool.acquire().await.map_err(failed)?, id).await
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        let exists =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM writers WHERE writer_no = ?1)");
        exists.bind(id).fetch_one(&self.pool).await.map_err(failed)
    }

    /// Every tier: the versions tiers of [`crate::versions`], the conditional writes of
    /// [`crate::conditional`], the idempotent creates of [`crate::keys`], the list's
    /// filter and sort of [`TABLES`].
    fn capabilities(self: std::sync::Arc<Self>) -> Capabilities<Self> {
        let versions = Capabilities::of(self).versions().version_tally();
        versions.conditional_writes().idempotent_creates().list_queries()
    }
}

impl ListQueries for CatalogueStore {}
