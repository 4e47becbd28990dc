//! A fresh SQLite file with the host's tables, per test, and the host's own SQL.
#![allow(dead_code)]

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use books_core::testing::store_cases::OutsideWrite;
use books_example_legacy_store::sqlite::{self, CatalogueStore, LEGACY_TABLES};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};

/// A new database file with the host's tables (and `extra` SQL), and a pool over it.
pub async fn host_database(extra: &str) -> SqlitePool {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("legacy-store");
    std::fs::create_dir_all(&dir).unwrap();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{}-{n}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .unwrap()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(std::time::Duration::from_secs(5));
    let pool = SqlitePool::connect_with(options).await.unwrap();
    sqlx::raw_sql(LEGACY_TABLES).execute(&pool).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(extra.to_owned())).execute(&pool).await.unwrap();
    pool
}

/// The store over a new database file with the host's tables.
pub async fn fresh() -> CatalogueStore {
    sqlite::store(host_database("").await).await.unwrap()
}

/// The host's tables, for a backup.
const TABLES: [&str; 3] = ["writers", "catalogue", "catalogue_version"];

/// A write from outside the store: the host's own SQL on its own tables (a backup
/// copies every table aside; restoring it puts their rows back, the version's counters
/// included, and the ids' sequences).
pub async fn host_writes(store: CatalogueStore, write: OutsideWrite) {
    let pool = store.pool();
    let script: Option<Vec<String>> = match &write {
        OutsideWrite::Snapshot { name } => Some(
            TABLES
                .iter()
                .flat_map(|t| {
                    [
                        format!("DROP TABLE IF EXISTS {name}_{t}"),
                        format!("CREATE TABLE {name}_{t} AS SELECT * FROM {t}"),
                    ]
                })
                .collect(),
        ),
        OutsideWrite::Restore { name } => Some(
            TABLES
                .iter()
                .flat_map(|t| {
                    [
                        format!("DELETE FROM {t}"),
                        format!("INSERT INTO {t} SELECT * FROM {name}_{t}"),
                    ]
                })
                .chain(TABLES.iter().take(2).map(|t| {
                    let id = if *t == "writers" { "writer_no" } else { "item_no" };
                    format!(
                        "UPDATE sqlite_sequence SET seq = COALESCE((SELECT MAX({id}) \
                         FROM {name}_{t}), 0) WHERE name = '{t}'"
                    )
                }))
                .collect(),
        ),
        _ => None,
    };
    if let Some(script) = script {
        let mut tx = pool.begin().await.unwrap();
        for sql in script {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await.unwrap();
        }
        return tx.commit().await.unwrap();
    }
    let done = match write {
        OutsideWrite::AddBook { title, author_id, year } => sqlx::query(
            "INSERT INTO catalogue (label, writer_no, pub_year, added, changed) \
             VALUES (?1, ?2, ?3, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
        )
        .bind(title)
        .bind(author_id)
        .bind(year),
        OutsideWrite::Retitle { id, title } => {
            sqlx::query("UPDATE catalogue SET label = ?1 WHERE item_no = ?2").bind(title).bind(id)
        }
        OutsideWrite::DeleteBook { id } => {
            sqlx::query("DELETE FROM catalogue WHERE item_no = ?1").bind(id)
        }
        OutsideWrite::RenameAuthor { id, name } => {
            sqlx::query("UPDATE writers SET full_name = ?1 WHERE writer_no = ?2")
                .bind(name)
                .bind(id)
        }
        other => panic!("no SQL for {other:?}"),
    };
    done.execute(pool).await.unwrap();
}
