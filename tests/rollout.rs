//! A rolling upgrade: the previous release's server (the commit in `.ci/previous-release`,
//! built by `scripts/previous-release`, its path in `BOOKS_TEST_PREVIOUS_BIN`) serves a
//! database under keyed writers and readers; this release's server starts on the same
//! database under that load (migrating it, if it has migrations the previous release
//! lacks), both serve it at once, requests alternating between them (a key retried on
//! the other server included), then the previous one leaves and stops. Through it all,
//! the history checks: every acknowledged create stored exactly once, no read older
//! than a write acknowledged (by either server) before it began, only 200, 201 and 503
//! with `Retry-After`. SQLite (one file), PostgreSQL and MariaDB.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use books_core::store::BookStore;
use books_sqlx::{MySqlStore, PostgresStore, SqliteStore};
use books_test_support::history::{Client, Load, nothing_lost_nothing_twice};
use tokio::process::{Child, Command};

mod common;

/// The server `binary` on `url`, listening on a port of its own.
async fn start(binary: &str, url: &str) -> (Child, SocketAddr) {
    let mut child = Command::new(binary)
        .args(["--listen", "127.0.0.1:0", "--database-url", url])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server starts");
    let addr = common::listening(&mut child).await;
    (child, addr)
}

/// Requests over HTTP to the server at `addr`.
fn http(addr: SocketAddr) -> Client {
    Arc::new(move |request| {
        Box::pin(async move {
            let answer = common::send(addr, request).await?;
            let retry = answer.header("retry-after").is_some();
            Some((answer.status, retry, answer.json()))
        })
    })
}

/// The rollout on `url`; `store` reads the books afterwards.
async fn rollout(url: &str, store: &impl BookStore) {
    let previous = std::env::var("BOOKS_TEST_PREVIOUS_BIN")
        .expect("BOOKS_TEST_PREVIOUS_BIN: scripts/previous-release builds it");
    // The previous release first: it migrates the database and loads the demo data
    // (author 1 and book 1 among them).
    let (mut old, old_addr) = start(&previous, url).await;
    let load = Load::start(vec![http(old_addr)], (1, 1), "rollout", 6, 4).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // This release starts, and migrates, under the previous one's load.
    let (_new, new_addr) = start(env!("CARGO_BIN_EXE_books-api"), url).await;
    load.use_clients(vec![http(old_addr), http(new_addr)]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The previous one leaves: no request goes there any more, then it stops.
    load.use_clients(vec![http(new_addr)]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let left = Instant::now();
    let pid = old.id().expect("running").to_string();
    let stopped = Command::new("kill").args(["-TERM", &pid]).status().await;
    assert!(
        stopped.is_ok_and(|s| s.success()),
        "SIGTERM to the previous server"
    );
    let exited = tokio::time::timeout(Duration::from_secs(30), old.wait()).await;
    assert!(
        exited.is_ok_and(|s| s.is_ok_and(|s| s.success())),
        "it stops cleanly"
    );
    load.writes_resume(left, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = load.stop().await;
    eprintln!("rollout on {url}: {:?}", seen.statuses());
    nothing_lost_nothing_twice(store, &seen).await;
}

#[cfg_attr(
    not(books_test_previous_release),
    ignore = "BOOKS_TEST_PREVIOUS_BIN is not set (scripts/previous-release)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_serves_both_releases_through_a_rollout() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rollout");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("rollout-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let url = format!("sqlite://{}", path.display());
    rollout(&url, &SqliteStore::connect(&url).await.unwrap()).await;
}

#[cfg_attr(
    not(all(books_test_previous_release, books_test_postgres)),
    ignore = "BOOKS_TEST_PREVIOUS_BIN or BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_serves_both_releases_through_a_rollout() {
    let url = std::env::var("BOOKS_TEST_POSTGRES_URL").expect("a database");
    common::with_database(&url, "rollout", async |url| {
        rollout(&url, &PostgresStore::connect_lazy(&url).unwrap()).await
    })
    .await;
}

#[cfg_attr(
    not(all(books_test_previous_release, books_test_mysql)),
    ignore = "BOOKS_TEST_PREVIOUS_BIN or BOOKS_TEST_MYSQL_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_serves_both_releases_through_a_rollout() {
    let url = std::env::var("BOOKS_TEST_MYSQL_URL").expect("a database");
    common::with_database(&url, "rollout", async |url| {
        rollout(&url, &MySqlStore::connect_lazy(&url).unwrap()).await
    })
    .await;
}
