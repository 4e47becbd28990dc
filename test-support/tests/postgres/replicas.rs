//! Reads from streaming replicas of a private primary (`books-test-support`'s cluster):
//! never older than a write acknowledged before the read began, whoever wrote it, even
//! with a replica that applies every commit 300 ms late; a replica stopped and started
//! under load costs no error, and takes reads again once it is back.

use std::sync::atomic::AtomicU64;

use books_core::CacheLimits;
use books_core::store::AuthorStore;
use books_test_support::{Cluster, started};

use super::*;

/// A private primary with one streaming replica applying commits `delay` late, and a
/// migrated store on the primary alone (the writer's).
async fn cluster_with_replica(delay: Duration) -> (Cluster, PostgresStore) {
    let mut cluster = started(
        Cluster::start(),
        "a private PostgreSQL cluster (initdb, pg_ctl)",
    );
    let replica = cluster.add_replica(delay).map(|_| ());
    assert!(
        replica.is_some(),
        "a streaming replica (pg_basebackup -R) starts"
    );
    let writer = PostgresStore::connect_lazy(&cluster.primary().url()).unwrap();
    writer.migrate().await.unwrap();
    (cluster, writer)
}

/// A store that reads from the cluster's replica.
fn reader(cluster: &Cluster) -> PostgresStore {
    let replica = PostgresStore::replica_pool(&cluster.replicas()[0].url()).unwrap();
    PostgresStore::connect_lazy(&cluster.primary().url())
        .unwrap()
        .with_replicas(vec![replica])
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
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_reads_are_never_older_than_acknowledged_writes() {
    let (cluster, writer) = cluster_with_replica(Duration::from_millis(300)).await;
    let author = writer.add_author(Some("A")).await.unwrap();
    let writes = BooksApi::new(writer, Config::default());
    let reading = reader(&cluster);
    let reads = BooksApi::new(reading.clone(), Config::default());
    let host = PgPool::connect(&cluster.primary().url()).await.unwrap();
    let replica = PgPool::connect(&cluster.replicas()[0].url()).await.unwrap();
    for n in 0..30 {
        let create = http::Request::post("/api/books")
            .body(format!("title=Book {n}&author_id={author}&year=2020"))
            .unwrap();
        assert_eq!(writes.handle(create).await.status(), 201);
    }

    let mut lagged = 0;
    for n in 0..20 {
        let title = format!("Version {n}");
        if n % 2 == 0 {
            let put = http::Request::put("/api/books/1")
                .body(format!("title={title}&author_id={author}&year=2020"))
                .unwrap();
            assert_eq!(writes.handle(put).await.status(), 200);
        } else {
            sqlx::query("UPDATE books SET title = $1 WHERE id = 1")
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
        // At first the replica has not even replayed the migrations.
        let there: Option<String> = sqlx::query_scalar("SELECT title FROM books WHERE id = 1")
            .fetch_one(&replica)
            .await
            .ok();
        lagged += usize::from(there.as_ref() != Some(&title));
    }
    assert!(
        lagged >= 15,
        "the replica itself lagged behind most writes ({lagged} of 20): else this proves nothing"
    );

    // Settled: the replica has replayed everything, and answers what the cache lacks.
    tokio::time::sleep(Duration::from_millis(1000)).await;
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
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_and_started_under_load_costs_no_error() {
    let (cluster, writer) = cluster_with_replica(Duration::ZERO).await;
    let author = writer.add_author(Some("A")).await.unwrap();
    for n in 0..50 {
        let book = books_core::store::BookInput {
            title: format!("Book {n}"),
            author_id: author,
            year: 2020,
        };
        writer.create(&book, chrono::Utc::now()).await.unwrap();
    }
    let reading = reader(&cluster);
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
    let node = &cluster.replicas()[0];
    assert!(node.down(), "pg_ctl stop");
    let during = answered.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        answered.load(Ordering::Relaxed) > during + 20,
        "the primary answered while the replica was down"
    );
    assert!(!reading.replicas()[0].up, "{:?}", reading.replicas());
    assert!(node.up(), "pg_ctl start");
    wait_for_reads("the replica takes reads again").await;
    stop.store(true, Ordering::Relaxed);
    for client in load {
        client.await.expect("no error answer");
    }
}
