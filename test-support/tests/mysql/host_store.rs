//! The example's store over a host's own MariaDB tables (`items`, `creators`, in
//! MariaDB's default collation, written by other programs too), books-sqlx's
//! `HostStore`, against every tier of the conformance suite and the whole HTTP suite.

use books_example_legacy_store::mariadb::{self, ItemsStore};

use super::*;

/// The host's tables as they stood before the API came.
const HOST_TABLES: &str = "\
    CREATE TABLE creators (creator_no BIGINT AUTO_INCREMENT PRIMARY KEY, \
        display_name VARCHAR(255)) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci; \
    CREATE TABLE items (item_no BIGINT AUTO_INCREMENT PRIMARY KEY, \
        label VARCHAR(255) NOT NULL, pub_year INT NOT NULL, creator_no BIGINT, \
        ins_ts DATETIME(6) NOT NULL, upd_ts DATETIME(6) NOT NULL) \
        DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci";

/// The store over a new database with the host's tables.
async fn fresh_items(cleanup: &Cleanup) -> ItemsStore {
    let pool = MySqlPool::connect_with(options_in(&fresh_database(cleanup).await))
        .await
        .unwrap();
    sqlx::raw_sql(HOST_TABLES).execute(&pool).await.unwrap();
    mariadb::store(pool).await.unwrap()
}

/// The tables a backup holds: the host's and the version's counters.
const BACKED_UP: [&str; 3] = ["creators", "items", "items_version"];

/// A write from outside the store: the host's own SQL on its own tables, on a
/// connection of its own, as another program's (a backup copies every table aside;
/// restoring it puts their rows back, the version's counters included).
async fn items_writes(store: ItemsStore, write: OutsideWrite) {
    let database = store
        .pool()
        .connect_options()
        .get_database()
        .map(str::to_owned);
    let mut host = options_in(&database.expect("a database"))
        .connect()
        .await
        .unwrap();
    if let Some(script) = common::tables_backup_sql(&write, &BACKED_UP) {
        for sql in script {
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut host)
                .await
                .unwrap();
        }
        return;
    }
    let done = match write {
        OutsideWrite::AddBook {
            title,
            author_id,
            year,
        } => sqlx::query(
            "INSERT INTO items (label, creator_no, pub_year, ins_ts, upd_ts) \
             VALUES (?, ?, ?, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
        )
        .bind(title)
        .bind(author_id)
        .bind(year),
        OutsideWrite::Retitle { id, title } => {
            sqlx::query("UPDATE items SET label = ? WHERE item_no = ?")
                .bind(title)
                .bind(id)
        }
        OutsideWrite::DeleteBook { id } => {
            sqlx::query("DELETE FROM items WHERE item_no = ?").bind(id)
        }
        OutsideWrite::RenameAuthor { id, name } => {
            sqlx::query("UPDATE creators SET display_name = ? WHERE creator_no = ?")
                .bind(name)
                .bind(id)
        }
        other => panic!("no SQL for {other:?}"),
    };
    done.execute(&mut host).await.unwrap();
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        #[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
        setup: fresh_items,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: items_writes,
        guard: cleanup,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(cleanup: &Cleanup, config: Config) -> InProcess<ItemsStore> {
        InProcess::new(fresh_items(cleanup).await, config)
    }
    books_core::http_contract_suite! {
        #[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
        make: in_process,
        outside_writes: items_writes,
        guard: cleanup,
    }
}
