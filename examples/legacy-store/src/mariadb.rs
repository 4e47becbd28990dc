//! The store over MariaDB tables `items` and `creators` (in the connection's database,
//! or named `catalog.items`; any collation: the title's filter and sort compare code
//! points whatever it is), written by other programs too.

use async_trait::async_trait;
use books_core::store::BookInput;
use books_sqlx::{
    AuthorColumns, BookColumns, BookTables, HostAuthors, HostStore, HostWrites, KeyRecords,
    VersionTriggers,
};
use chrono::{DateTime, Utc};
use sqlx::mysql::{MySql, MySqlConnection, MySqlPool};

/// The store: books-sqlx's, over the host's tables and its writes.
pub type ItemsStore = HostStore<MySql, Items>;

/// Installs the version's triggers (counters in `items_version`, moved by every write to
/// `items` or `creators`, with the books' tally) and the keys' table (`items_keys`)
/// beside the host's tables (safe to repeat), and gives the store over `pool`.
pub async fn store(pool: MySqlPool) -> Result<ItemsStore, books_sqlx::Error> {
    let version = VersionTriggers::new("items_version", "items")?;
    let version = version.also("creators")?.with_tally("item_no")?;
    let keys = KeyRecords::new("items_keys")?;
    version.install(&pool).await?;
    keys.install(&pool).await?;
    let columns = BookColumns {
        id: "i.item_no",
        title: "i.label",
        year: "i.pub_year",
        author_id: "i.creator_no",
        created_at: "i.ins_ts",
        updated_at: "i.upd_ts",
        folded_title: None,
    };
    let creators =
        AuthorColumns { table: "creators c", id: "c.creator_no", name: "c.display_name" };
    let tables = BookTables::new("items i", columns, creators);
    Ok(HostStore::new(pool, tables, version, keys, Items))
}

/// The host's own writes to its tables.
#[derive(Debug)]
pub struct Items;

#[async_trait]
impl HostWrites<MySql> for Items {
    async fn insert(
        &self,
        conn: &mut MySqlConnection,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, sqlx::Error> {
        let insert = "INSERT INTO items (label, creator_no, pub_year, ins_ts, upd_ts) \
            SELECT ?, creator_no, ?, ?, ? FROM creators WHERE creator_no = ? RETURNING item_no";
        let insert = sqlx::query_scalar(insert).bind(&new.title).bind(new.year);
        insert.bind(now).bind(now).bind(new.author_id).fetch_optional(conn).await
    }

    async fn update(
        &self,
        conn: &mut MySqlConnection,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let update = "UPDATE items SET label = ?, creator_no = ?, pub_year = ?, upd_ts = ? \
            WHERE item_no = ? AND EXISTS (SELECT 1 FROM creators WHERE creator_no = ?)";
        let update = sqlx::query(update).bind(&new.title).bind(new.author_id).bind(new.year);
        let update = update.bind(now).bind(id).bind(new.author_id);
        Ok(update.execute(conn).await?.rows_affected() > 0)
    }

    async fn delete(&self, conn: &mut MySqlConnection, id: i64) -> Result<bool, sqlx::Error> {
        let delete = sqlx::query("DELETE FROM items WHERE item_no = ?").bind(id);
        Ok(delete.execute(conn).await?.rows_affected() > 0)
    }

    async fn author_exists(
        &self,
        conn: &mut MySqlConnection,
        id: i64,
    ) -> Result<bool, sqlx::Error> {
        let count = "SELECT COUNT(*) FROM creators WHERE creator_no = ?";
        Ok(sqlx::query_scalar::<_, i64>(count).bind(id).fetch_one(conn).await? > 0)
    }
}

/// The creators, which the host adds and removes (the API only reads them): for demo
/// data and the tests. Removing one leaves its books without one.
#[async_trait]
impl HostAuthors<MySql> for Items {
    async fn add_author(
        &self,
        conn: &mut MySqlConnection,
        name: Option<&str>,
    ) -> Result<i64, sqlx::Error> {
        let add = "INSERT INTO creators (display_name) VALUES (?) RETURNING creator_no";
        sqlx::query_scalar(add).bind(name).fetch_one(conn).await
    }

    async fn remove_author(
        &self,
        conn: &mut MySqlConnection,
        id: i64,
    ) -> Result<bool, sqlx::Error> {
        let orphan = sqlx::query("UPDATE items SET creator_no = NULL WHERE creator_no = ?");
        orphan.bind(id).execute(&mut *conn).await?;
        let gone = sqlx::query("DELETE FROM creators WHERE creator_no = ?").bind(id);
        Ok(gone.execute(conn).await?.rows_affected() > 0)
    }
}
