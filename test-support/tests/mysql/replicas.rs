//! Reads from GTID replicas of a private primary (`books-test-support`'s MariaDB
//! servers): never older than a write acknowledged before the read began, whoever wrote
//! it, even with a replica that applies every transaction seconds late; a replica
//! stopped and started under load costs no error, and takes reads again once it is back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use books_core::store::{AuthorStore, BookInput};
use books_core::{BooksApi, CacheLimits};
use books_test_support::{MariaDb, started};

use super::*;

const DATABASE: &str = "books";

/// A private primary with one replica applying transactions `delay` late, and a
/// migrated store on the primary alone (the writer's).
async fn primary_with_replica(delay: Duration) -> (MariaDb, MariaDb, MySqlStore) {
    let primary = started(MariaDb::primary(), "a private MariaDB server (mariadbd)");
    assert!(primary.sql(&format!("CREATE DATABASE {DATABASE}")));
    let replica = started(MariaDb::replica_of(&primary, delay), "a MariaDB replica");
    let writer = MySqlStore::connect_lazy(&primary.url(DATABASE)).unwrap();
    writer.migrate().await.unwrap();
    (primary, replica, writer)
}

/// A store that reads from `replica`.
fn reader(primary: &MariaDb, replica: &MariaDb) -> MySqlStore {
    let pool = MySqlStore::replica_pool(&replica.url(DATABASE)).unwrap();
    MySqlStore::connect_lazy(&primary.url(DATABASE))
        .unwrap()
        .with_replicas(vec![pool])
}

async fn json(api: &BooksApi, path: &str) -> serde_json::Value {
    let request = http::Request::get(path).body(String::new()).unwrap();
    let response = api.handle(request).await;
    assert_eq!(response.status(), 200, "{path}: {:?}", response.body());
    serde_json::from_slice(response.body()).unwrap()
}

/// Another process (an API over the primary alone) and the host's own SQL write, one
/// after the other; each write, once acknowledged, is what the reading API (cache on)
/// answers at once, although the replica itself still shows older data. Once writes
/// settle, the replica answers the reads.
#[cfg_attr(
    not(books_test_mariadb_servers),
    ignore = "needs MariaDB's server tools (mariadbd, mariadb-install-db)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_reads_are_never_older_than_acknowledged_writes() {
    // `MASTER_DELAY` counts from a write's whole second: 3 s holds each write back at
    // least 2 s, longer than a loop turn below takes on a loaded machine.
    let (primary, replica, writer) = primary_with_replica(Duration::from_secs(3)).await;
    let author = writer.add_author(Some("A")).await.unwrap();
    let writes = BooksApi::new(writer, Config::default());
    let reading = reader(&primary, &replica);
    let reads = BooksApi::new(reading.clone(), Config::default());
    let host = MySqlPool::connect(&primary.url(DATABASE)).await.unwrap();
    let on_replica = MySqlPool::connect(&replica.url("mysql")).await.unwrap();
    for n in 0..30 {
        let create = http::Request::post("/api/books")
            .body(format!("title=Book {n}&author_id={author}&year=2020"))
            .unwrap();
        assert_eq!(writes.handle(create).await.status(), 201);
    }

    let mut lagged = 0;
    for n in 0..10 {
        let title = format!("Version {n}");
        if n % 2 == 0 {
            let put = http::Request::put("/api/books/1")
                .body(format!("title={title}&author_id={author}&year=2020"))
                .unwrap();
            assert_eq!(writes.handle(put).await.status(), 200);
        } else {
            sqlx::query("UPDATE books SET title = ? WHERE id = 1")
                .bind(&title)
                .execute(&host)
                .await
                .unwrap();
        }
        let book = json(&reads, "/api/books/1?include=author").await;
        assert_eq!(book["title"], title.as_str(), "a book read after write {n}");
        let page = json(&reads, "/api/books").await;
        assert_eq!(
            page["data"][0]["title"],
            title.as_str(),
            "a page after write {n}"
        );
        // At first the replica has not even applied the migration.
        let there: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT title FROM {DATABASE}.books WHERE id = 1"
        )))
        .fetch_one(&on_replica)
        .await
        .ok();
        lagged += usize::from(there.as_ref() != Some(&title));
    }
    assert!(
        lagged >= 8,
        "the replica itself lagged behind most writes ({lagged} of 10): else this proves nothing"
    );

    // Settled: the replica has applied everything, and answers what the cache lacks.
    let settled = Instant::now() + Duration::from_secs(20);
    loop {
        let there: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT title FROM {DATABASE}.books WHERE id = 1"
        )))
        .fetch_one(&on_replica)
        .await
        .ok();
        if there.as_deref() == Some("Version 9") {
            break;
        }
        assert!(
            Instant::now() < settled,
            "the replica applied the last write"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = reading.replicas()[0].reads;
    for path in [
        "/api/books?page=2",
        "/api/books/2",
        "/api/books/3?include=author",
        "/api/books/4",
        "/api/books?include=author",
    ] {
        json(&reads, path).await;
    }
    let state = &reading.replicas()[0];
    assert_eq!(
        state.reads - before,
        5,
        "the replica answered every settled read: {state:?}"
    );
    assert!(state.up);
    assert_eq!(state.lag, Some(0), "{state:?}");
}

/// Under read load (cache off: every read asks the store), the replica stops and starts
/// again: not one answer is an error, the primary answers meanwhile, and the replica
/// takes reads again once it is back.
#[cfg_attr(
    not(books_test_mariadb_servers),
    ignore = "needs MariaDB's server tools (mariadbd, mariadb-install-db)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_and_started_under_load_costs_no_error() {
    let (primary, mut replica, writer) = primary_with_replica(Duration::ZERO).await;
    let author = writer.add_author(Some("A")).await.unwrap();
    for n in 0..50 {
        let book = BookInput {
            title: format!("Book {n}"),
            author_id: author,
            year: 2020,
        };
        writer.create(&book, chrono::Utc::now()).await.unwrap();
    }
    let reading = reader(&primary, &replica);
    let reads = BooksApi::new(
        reading.clone(),
        Config::default().with_cache(None::<CacheLimits>),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let load: Vec<_> = (0..8)
        .map(|client| {
            let (reads, stop, answered) = (reads.clone(), stop.clone(), answered.clone());
            tokio::spawn(async move {
                let mut n = client;
                while !stop.load(Ordering::Relaxed) {
                    let path = if n % 2 == 0 {
                        format!("/api/books?page={}", n % 3 + 1)
                    } else {
                        format!("/api/books/{}", n % 50 + 1)
                    };
                    let request = http::Request::get(&path).body(String::new()).unwrap();
                    let response = reads.handle(request).await;
                    assert_eq!(response.status(), 200, "{path}: {:?}", response.body());
                    answered.fetch_add(1, Ordering::Relaxed);
                    n += 8;
                }
            })
        })
        .collect();

    let wait_for_reads = async |what: &str| {
        let before = reading.replicas()[0].reads;
        let deadline = Instant::now() + Duration::from_secs(10);
        while reading.replicas()[0].reads < before + 20 {
            assert!(
                Instant::now() < deadline,
                "{what}: {:?}",
                reading.replicas()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    wait_for_reads("the replica takes reads").await;
    assert!(replica.down(), "the replica stops");
    let during = answered.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        answered.load(Ordering::Relaxed) > during + 20,
        "the primary answered while the replica was down"
    );
    assert!(!reading.replicas()[0].up, "{:?}", reading.replicas());
    assert!(replica.up(), "the replica starts again");
    wait_for_reads("the replica takes reads again").await;
    stop.store(true, Ordering::Relaxed);
    for client in load {
        client.await.expect("no error answer");
    }
}
