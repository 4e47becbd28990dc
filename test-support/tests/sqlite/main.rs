//! The SQLite store against the shared suites, on a fresh database file per test.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use books_core::Config;
use books_core::store::{AuthorStore, BookInput, BookStore, ListQuery, Versions};
use books_core::testing::InProcess;
use books_core::testing::store_cases::OutsideWrite;
use books_sqlx::sqlx::sqlite::SqlitePool;
use books_sqlx::sqlx::{self, AssertSqlSafe, Connection};
use books_sqlx::{MIGRATIONS_TABLE, SqliteStore};
use chrono::Utc;

/// A new, empty database file under the target directory (cleared once per run).
fn fresh_path() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("books-sqlite-tests");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test directory");
        dir
    });
    dir.join(format!("{}.db", NEXT.fetch_add(1, Ordering::Relaxed)))
}

fn url(path: &std::path::Path) -> String {
    format!("sqlite://{}", path.display())
}

async fn fresh() -> SqliteStore {
    let store = SqliteStore::connect(&url(&fresh_path()))
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    store
}

/// A write from outside the store: the host's own SQL on a connection of its own.
async fn host_writes(store: SqliteStore, write: OutsideWrite) {
    let path = store.writer().connect_options().get_filename().to_owned();
    let mut host = sqlx::SqliteConnection::connect(&url(&path)).await.unwrap();
    if let Some(script) = common::backup_sql(&write, common::Db::Sqlite) {
        for sql in script {
            let sql = sql.replace("{s}", "");
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut host)
                .await
                .expect("backup");
        }
        return;
    }
    let (sql, values) = common::outside_sql(write);
    let mut query = sqlx::query(AssertSqlSafe(sql.replace("{s}", "")));
    for value in values {
        query = match value {
            common::Value::Int(n) => query.bind(n),
            common::Value::Text(text) => query.bind(text),
        };
    }
    query.execute(&mut host).await.unwrap();
}

#[path = "../common/mod.rs"]
mod common;
mod wal_index;
use common::{
    api_works, cache_is_exact_across_writers, host_migrator, kept_pages_stay_exact_across_writers,
};

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        setup: fresh,
        tiers: [versions, known_version, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
    }
}

/// The conformance suite again with no filter's ids kept: pages in id order start from
/// marks.
mod without_kept_ids {
    use super::*;
    async fn fresh_without_ids() -> SqliteStore {
        fresh().await.with_kept_ids(0)
    }
    books_core::store_conformance_suite! {
        setup: fresh_without_ids,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(config: Config) -> InProcess<SqliteStore> {
        InProcess::new(fresh().await, config)
    }
    books_core::http_contract_suite! {
        make: in_process,
        outside_writes: host_writes,
    }
}

#[tokio::test]
async fn in_memory_url_is_one_shared_database() {
    let store = SqliteStore::connect("sqlite::memory:").await.unwrap();
    store.migrate().await.unwrap();
    let author = store.add_author(Some("A")).await.unwrap();
    let book = BookInput {
        title: "T".into(),
        author_id: author,
        year: 2020,
    };
    let before = store.version().await.unwrap();
    store.create(&book, Utc::now()).await.unwrap();
    let after = store.version().await.unwrap();
    assert_ne!(after, before, "the version check reads the same database");
    let first_page = ListQuery::new(0, 20);
    let (a, b) = tokio::join!(store.list(&first_page), store.get(1));
    assert_eq!(a.unwrap().total, 1);
    assert!(b.unwrap().is_some());
}

/// Two stores on one file stand for two processes: their writers contend for the lock
/// and must wait (busy timeout) rather than fail with "database is locked".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_never_report_locked() {
    let path = fresh_path();
    let first = SqliteStore::connect(&url(&path)).await.unwrap();
    first.migrate().await.unwrap();
    let second = SqliteStore::connect(&url(&path)).await.unwrap();
    let author = first.add_author(Some("A")).await.unwrap();
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let store = if n % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            tokio::spawn(async move {
                for i in 0..4 {
                    let book = BookInput {
                        title: format!("{n}-{i}"),
                        author_id: author,
                        year: 2020,
                    };
                    store
                        .create(&book, Utc::now())
                        .await
                        .expect("create under contention");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(first.list(&ListQuery::new(0, 1)).await.unwrap().total, 200);
}

#[tokio::test]
async fn connections_are_durable_wal_with_foreign_keys() {
    let path = fresh_path();
    let mut conn =
        sqlx::SqliteConnection::connect_with(&SqliteStore::options(&url(&path)).unwrap())
            .await
            .unwrap();
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(journal, "wal");
    assert_eq!(synchronous, 2, "FULL");
    assert_eq!(foreign_keys, 1);
    assert!(busy >= 1000, "busy timeout {busy} ms");
}

#[tokio::test]
async fn migrations_are_idempotent_and_upsert_keeps_ids_moving() {
    let store = fresh().await;
    store.migrate().await.expect("second migrate is a no-op");
    store.upsert_author(40, Some("Forty")).await.unwrap();
    store.upsert_author(40, Some("Renamed")).await.unwrap();
    let next = store.add_author(Some("Next")).await.unwrap();
    assert!(next > 40);
    let book = BookInput {
        title: "T".into(),
        author_id: 40,
        year: 2020,
    };
    let id = store.create(&book, Utc::now()).await.unwrap().id;
    let found = store.get(id).await.unwrap().unwrap();
    assert_eq!(found.author_name.as_deref(), Some("Renamed"));
}

/// The versions recorded in a bookkeeping table.
async fn versions(pool: &SqlitePool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {table} ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn host_migrations_and_ours_share_one_file_in_either_order() {
    for ours_first in [true, false] {
        let pool = SqlitePool::connect_with(SqliteStore::options(&url(&fresh_path())).unwrap())
            .await
            .unwrap();
        // The host's pool, split as the store prefers: one writer, the rest readers.
        let store = SqliteStore::from_pools(pool.clone(), pool.clone());
        if ours_first {
            store.migrate().await.unwrap();
            host_migrator().run(&pool).await.unwrap();
        } else {
            host_migrator().run(&pool).await.unwrap();
            store.migrate().await.unwrap();
        }
        store.migrate().await.expect("our re-run is a no-op");
        host_migrator()
            .run(&pool)
            .await
            .expect("the host's re-run is a no-op");
        assert_eq!(versions(&pool, "_sqlx_migrations").await, [20250101000000]);
        assert_eq!(versions(&pool, MIGRATIONS_TABLE).await, ours());
        sqlx::query("INSERT INTO widgets (name) VALUES ('w')")
            .execute(&pool)
            .await
            .unwrap();
        api_works(store).await;
    }
}

/// books-sqlx's key records over a table in a host's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_records_over_a_host_table() {
    let options = SqliteStore::options(&url(&fresh_path())).unwrap();
    let pool = SqlitePool::connect_with(options).await.unwrap();
    common::parts::key_records_keep_replay_and_expire(&pool, "api_keys").await;
}

/// books-sqlx's reads over a host's tables of other names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn book_tables_over_host_tables() {
    let options = SqliteStore::options(&url(&fresh_path())).unwrap();
    let pool = SqlitePool::connect_with(options).await.unwrap();
    let host = common::parts::HostTables {
        schema: String::new(),
        create: [
            "CREATE TABLE people (person_code INTEGER PRIMARY KEY, display_name TEXT)",
            "CREATE TABLE titles (title_code INTEGER PRIMARY KEY, heading TEXT NOT NULL, \
             released INTEGER NOT NULL, penned_by INTEGER, inserted_at TEXT NOT NULL, \
             touched_at TEXT NOT NULL)",
        ],
        begin_write: "BEGIN IMMEDIATE",
        time: "'2026-01-01 00:00:00'",
    };
    common::parts::book_tables_read_in_the_api_names(&pool, host).await;
}

/// The versions of our embedded migrations.
fn ours() -> Vec<i64> {
    SqliteStore::migrator().iter().map(|m| m.version).collect()
}

/// Two stores on one file, as two API processes would have, and the host's own pool.
async fn two_stores_and_a_host() -> (SqliteStore, SqliteStore, SqlitePool) {
    let path = fresh_path();
    let ours = SqliteStore::connect(&url(&path)).await.unwrap();
    ours.migrate().await.unwrap();
    let theirs = SqliteStore::connect(&url(&path)).await.unwrap();
    let host = SqlitePool::connect(&url(&path)).await.unwrap();
    (ours, theirs, host)
}

async fn host_sql(host: &SqlitePool, sql: &str, author: i64) {
    sqlx::query(AssertSqlSafe(sql.replace("{s}", "")))
        .bind(author)
        .execute(host)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_create_fails_alone() {
    let (ours, _, host) = two_stores_and_a_host().await;
    sqlx::raw_sql(
        "CREATE TRIGGER reject BEFORE INSERT ON books WHEN NEW.title = 'rejected' \
         BEGIN SELECT RAISE(ABORT, 'rejected'); END",
    )
    .execute(&host)
    .await
    .unwrap();
    common::a_rejected_create_fails_alone(ours).await;
}

#[tokio::test]
async fn cached_reads_see_every_writer() {
    let (ours, theirs, host) = two_stores_and_a_host().await;
    cache_is_exact_across_writers(ours, theirs, async |sql, author| {
        host_sql(&host, sql, author).await
    })
    .await;
}

#[tokio::test]
async fn kept_pages_see_every_writer() {
    let (ours, theirs, host) = two_stores_and_a_host().await;
    kept_pages_stay_exact_across_writers(ours, theirs, "", async |sql, author| {
        host_sql(&host, sql, author).await
    })
    .await;
}

#[tokio::test]
async fn deep_pages_cross_groups() {
    let (ours, _, host) = two_stores_and_a_host().await;
    common::deep_pages_cross_groups(ours, async |sql, author| host_sql(&host, sql, author).await)
        .await;
}

#[tokio::test]
async fn batched_creates_count_as_every_other_insert() {
    let (ours, _, host) = two_stores_and_a_host().await;
    common::batched_creates_count_as_every_other_insert(ours, async |sql, author| {
        host_sql(&host, sql, author).await
    })
    .await;
}
