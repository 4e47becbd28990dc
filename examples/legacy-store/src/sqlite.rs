//! The store over SQLite tables `catalogue` and `writers` (no foreign key: each write
//! checks the writer itself).

use async_trait::async_trait;
use books_core::store::BookInput;
use books_sqlx::{
    AuthorColumns, BookColumns, BookTables, HostAuthors, HostStore, HostWrites, KeyRecords,
    VersionTriggers,
};
use chrono::{DateTime, Utc};
use sqlx::query::Query;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteConnection, SqlitePool};

/// The store: books-sqlx's, over the host's tables and its writes.
pub type CatalogueStore = HostStore<Sqlite, Catalogue>;

/// The host's tables as they stood before the API came (for the tests and the docs: a
/// real host has them already).
pub const LEGACY_TABLES: &str = "\
    CREATE TABLE writers (writer_no INTEGER PRIMARY KEY AUTOINCREMENT, full_name TEXT); \
    CREATE TABLE catalogue (item_no INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT NOT NULL, \
        writer_no INTEGER, pub_year INTEGER NOT NULL, added TEXT NOT NULL, \
        changed TEXT NOT NULL);";

/// Installs the version's triggers (counters in `catalogue_version`, moved by every
/// write to `catalogue` or `writers`, with the books' tally) and the keys' table
/// (`catalogue_keys`) beside the host's tables (safe to repeat), and gives the store
/// over `pool`.
pub async fn store(pool: SqlitePool) -> Result<CatalogueStore, books_sqlx::Error> {
    let version = VersionTriggers::new("catalogue_version", "catalogue")?;
    let version = version.also("writers")?.with_tally("item_no")?;
    let keys = KeyRecords::new("catalogue_keys")?;
    version.install(&pool).await?;
    keys.install(&pool).await?;
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
    let tables = BookTables::new("catalogue c", columns, writers);
    Ok(HostStore::new(pool, tables, version, keys, Catalogue))
}

/// The host's own writes to its tables.
#[derive(Debug)]
pub struct Catalogue;

/// `sql` with a book's fields bound: `?1` title, `?2` writer, `?3` year, `?4` now.
fn with_book<'q>(
    sql: &'static str,
    new: &'q BookInput,
    now: DateTime<Utc>,
) -> Query<'q, Sqlite, SqliteArguments> {
    sqlx::query(sql).bind(&new.title).bind(new.author_id).bind(new.year).bind(now)
}

#[async_trait]
impl HostWrites<Sqlite> for Catalogue {
    async fn insert(
        &self,
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

    async fn update(
        &self,
        conn: &mut SqliteConnection,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let update = "UPDATE catalogue SET label = ?1, writer_no = ?2, pub_year = ?3, \
            changed = ?4 WHERE item_no = ?5 AND EXISTS (SELECT 1 FROM writers WHERE writer_no = ?2)";
        Ok(with_book(update, new, now).bind(id).execute(conn).await?.rows_affected() > 0)
    }

    async fn delete(&self, conn: &mut SqliteConnection, id: i64) -> Result<bool, sqlx::Error> {
        let delete = sqlx::query("DELETE FROM catalogue WHERE item_no = ?1").bind(id);
        Ok(delete.execute(conn).await?.rows_affected() > 0)
    }

    async fn author_exists(
        &self,
        conn: &mut SqliteConnection,
        id: i64,
    ) -> Result<bool, sqlx::Error> {
        let exists = "SELECT EXISTS (SELECT 1 FROM writers WHERE writer_no = ?1)";
        sqlx::query_scalar(exists).bind(id).fetch_one(conn).await
    }
}

/// The writers, which the host adds and removes (the API only reads them): for demo
/// data and the tests. Removing one leaves its books without one.
#[async_trait]
impl HostAuthors<Sqlite> for Catalogue {
    async fn add_author(
        &self,
        conn: &mut SqliteConnection,
        name: Option<&str>,
    ) -> Result<i64, sqlx::Error> {
        let add = "INSERT INTO writers (full_name) VALUES (?1) RETURNING writer_no";
        sqlx::query_scalar(add).bind(name).fetch_one(conn).await
    }

    async fn remove_author(
        &self,
        conn: &mut SqliteConnection,
        id: i64,
    ) -> Result<bool, sqlx::Error> {
        let orphan = sqlx::query("UPDATE catalogue SET writer_no = NULL WHERE writer_no = ?1");
        orphan.bind(id).execute(&mut *conn).await?;
        let gone = sqlx::query("DELETE FROM writers WHERE writer_no = ?1").bind(id);
        Ok(gone.execute(conn).await?.rows_affected() > 0)
    }
}
