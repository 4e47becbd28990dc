//! A lossy failover: the primary acknowledged a write its replica never got, died, and the
//! replica was promoted; the new primary's history moves on with a write of the host's
//! own SQL. A store named by both hosts follows the promotion, and from then on every
//! answer is the new history's: the lost book is never served from what the process kept,
//! the new one always is. On PostgreSQL (streaming replication) and on MariaDB (GTID
//! replication). And a lossless one on PostgreSQL (the primary stopped cleanly, so its
//! replica had every write): the process keeps its cached answers.

use std::time::{Duration, Instant};

use std::sync::Arc;

use books_core::store::{AuthorStore, BookStore, Hooked, StoreCall};
use books_core::testing::CountingHook;
use books_core::{BooksApi, Config};
use books_sqlx::{MySqlStore, PostgresStore};
use books_test_support::{Cluster, MariaDb, started};

use super::call;

/// The titles `GET /api/books` answers through `api`, or `None` for a 503.
async fn listed(api: &BooksApi) -> Option<Vec<String>> {
    let (status, retry, json) = call(api, "GET", "/api/books", &[], "").await;
    if status == 503 {
        assert!(retry, "a 503 has Retry-After");
        return None;
    }
    assert_eq!(status, 200, "{json}");
    let titles = json["data"].as_array().expect("a page");
    Some(
        titles
            .iter()
            .map(|b| b["title"].as_str().unwrap().to_owned())
            .collect(),
    )
}

/// Reads `api` for `reads` after the new history's first write: the first 200 within 10 s,
/// then each answer must show "After" and not "Lost". The answers that disagreed, of all.
async fn disagreements(api: &BooksApi, reads: Duration) -> (usize, usize) {
    let start = Instant::now();
    let (mut wrong, mut answered) = (0, 0);
    while start.elapsed() < reads || answered == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no 200 within 10 s of the promotion"
        );
        if let Some(titles) = listed(api).await {
            answered += 1;
            let has = |t: &str| titles.iter().any(|title| title == t);
            if has("Lost") || !has("After") || !has("Kept") {
                wrong += 1;
                eprintln!("disagrees with the database: {titles:?}");
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (wrong, answered)
}

/// Creates "Lost" through `api` and reads it back (the process keeps the page).
async fn acknowledge_lost(api: &BooksApi, author: i64) {
    let body = format!("title=Lost&author_id={author}&year=2020");
    let (status, _, json) = call(api, "POST", "/api/books", &[], &body).await;
    assert_eq!(status, 201, "{json}");
    for _ in 0..2 {
        let titles = listed(api).await.expect("the primary answers");
        assert!(titles.contains(&"Lost".to_owned()), "{titles:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
async fn postgres_a_lossy_failover_is_never_served_from_the_old_history() {
    let _one_at_a_time = super::one_at_a_time().await;
    let mut cluster = started(
        Cluster::start(),
        "a private PostgreSQL cluster (initdb, pg_ctl)",
    );
    assert!(
        cluster.add_replica(Duration::ZERO).is_some(),
        "a streaming replica"
    );
    let (primary, replica) = (cluster.primary().port(), cluster.replicas()[0].port());
    let url = format!("postgres://postgres@127.0.0.1:{primary},127.0.0.1:{replica}/postgres");
    let store = PostgresStore::connect_lazy(&url).expect("a multi-host URL");
    store.migrate().await.expect("migrated");
    let author = store.add_author(Some("Failover")).await.unwrap();
    let kept = books_core::store::BookInput {
        title: "Kept".into(),
        author_id: author,
        year: 2020,
    };
    store.create(&kept, chrono::Utc::now()).await.unwrap();
    let api = BooksApi::new(store.clone(), Config::default());
    let replicated = "SELECT count(*) FROM books WHERE title = 'Kept'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.replicas()[0].sql(replicated).as_deref() != Some("1") {
        assert!(
            Instant::now() < deadline,
            "the replica has Kept within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert!(cluster.replicas()[0].detach(), "the replica detached");
    acknowledge_lost(&api, author).await;
    assert!(cluster.primary().crash(), "the primary crashed");
    assert!(cluster.promote(0), "the replica promoted");
    let after = format!(
        "INSERT INTO books (title, author_id, year, created_at, updated_at) VALUES ('After', {author}, 2021, now(), now())"
    );
    assert!(
        cluster.replicas()[0].sql(&after).is_some(),
        "the new history's first write"
    );

    let (wrong, answered) = disagreements(&api, Duration::from_secs(3)).await;
    eprintln!("postgres lossy failover: {wrong} of {answered} answers disagreed with the database");
    assert_eq!(wrong, 0, "of {answered} answers");
    let (status, _, _) = call(
        &api,
        "POST",
        "/api/books",
        &[],
        &format!("title=New&author_id={author}&year=2022"),
    )
    .await;
    assert_eq!(status, 201, "writes go to the new primary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
async fn postgres_a_lossless_promotion_keeps_the_cached_answers() {
    lossless_promotion(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
async fn postgres_a_lossless_promotion_keeps_the_cached_answers_in_push_mode() {
    lossless_promotion(true).await;
}

/// A replica promoted after its primary stopped cleanly (so it has every write): the
/// first answer from it is the one the process cached before, and in push mode the
/// listener's version is trusted again (answers without a version query).
async fn lossless_promotion(push: bool) {
    let _one_at_a_time = super::one_at_a_time().await;
    let mut cluster = started(
        Cluster::start(),
        "a private PostgreSQL cluster (initdb, pg_ctl)",
    );
    assert!(
        cluster.add_replica(Duration::ZERO).is_some(),
        "a streaming replica"
    );
    let (primary, replica) = (cluster.primary().port(), cluster.replicas()[0].port());
    let url = format!("postgres://postgres@127.0.0.1:{primary},127.0.0.1:{replica}/postgres");
    let mut store = PostgresStore::connect_lazy(&url).expect("a multi-host URL");
    store.migrate().await.expect("migrated");
    if push {
        store = store.listening();
        store.set_push(true).await.expect("push mode on");
    }
    let author = store.add_author(Some("Failover")).await.unwrap();
    let kept = books_core::store::BookInput {
        title: "Kept".into(),
        author_id: author,
        year: 2020,
    };
    let id = store.create(&kept, chrono::Utc::now()).await.unwrap().id;
    let hooked = Arc::new(Hooked::new(store, CountingHook::default()));
    let api = BooksApi::from_arc(hooked.clone(), Config::default());
    let count = |call| hooked.hook().count(call);
    let reads = || count(StoreCall::Get) + count(StoreCall::GetVersioned);
    let book = format!("/api/books/{id}");
    for _ in 0..2 {
        let (status, _, json) = call(&api, "GET", &book, &[], "").await;
        assert_eq!(status, 200, "{json}");
    }
    assert_eq!(reads(), 1, "the second answer is the cache's");

    // Stopped cleanly, the primary sends its replica every write before it exits.
    assert!(cluster.primary().down(), "the primary stopped");
    assert!(cluster.promote(0), "the replica promoted");
    let after = format!(
        "INSERT INTO books (title, author_id, year, created_at, updated_at) VALUES ('After', {author}, 2021, now(), now())"
    );
    assert!(
        cluster.replicas()[0].sql(&after).is_some(),
        "the new timeline's first write"
    );

    // The first 200 from the new primary (its check reads the new timeline and the
    // append) is the answer kept from the old one.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "no 200 within 10 s of the promotion"
        );
        let before = reads();
        let (status, retry, json) = call(&api, "GET", &book, &[], "").await;
        if status == 200 {
            assert_eq!(json["title"], "Kept", "{json}");
            assert_eq!(
                reads(),
                before,
                "answered from the cache kept before the promotion"
            );
            break;
        }
        assert!(status == 503 && retry, "{status} {json}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if push {
        // The listener, on the new primary, tells the history the check tells: the
        // cache trusts it and answers without asking the database.
        let checks = || count(StoreCall::TalliedVersion) + count(StoreCall::Version);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(
                Instant::now() < deadline,
                "the pushed version not trusted within 10 s of the promotion"
            );
            let before = (checks(), reads());
            let (status, _, json) = call(&api, "GET", &book, &[], "").await;
            assert_eq!(status, 200, "{json}");
            if (checks(), reads()) == before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // A page read from the store (a pooled connection to the old primary may fail
    // first, with a 503).
    let deadline = Instant::now() + Duration::from_secs(10);
    let titles = loop {
        if let Some(titles) = listed(&api).await {
            break titles;
        }
        assert!(Instant::now() < deadline, "no page within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(titles, ["Kept", "After"], "the page is the new primary's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_mariadb_servers),
    ignore = "needs MariaDB's server (mariadbd, mariadb-install-db)"
)]
async fn mariadb_a_lossy_failover_is_never_served_from_the_old_history() {
    let _one_at_a_time = super::one_at_a_time().await;
    let mut primary = started(MariaDb::primary(), "a private MariaDB server");
    let replica = started(
        MariaDb::replica_of(&primary, Duration::ZERO),
        "a MariaDB replica",
    );
    assert!(
        replica.sql("SET GLOBAL read_only = ON"),
        "the replica read-only"
    );
    assert!(primary.sql("CREATE DATABASE books"), "database books");
    let url = format!(
        "mysql://root@127.0.0.1:{},127.0.0.1:{}/books",
        primary.port(),
        replica.port()
    );
    let store = MySqlStore::connect_lazy(&url).expect("a multi-host URL");
    store.migrate().await.expect("migrated");
    let author = store.add_author(Some("Failover")).await.unwrap();
    let kept = books_core::store::BookInput {
        title: "Kept".into(),
        author_id: author,
        year: 2020,
    };
    store.create(&kept, chrono::Utc::now()).await.unwrap();
    let api = BooksApi::new(store.clone(), Config::default());
    let replicated = "SELECT count(*) FROM books.books WHERE title = 'Kept'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while replica.query(replicated).as_deref() != Some("1") {
        assert!(
            Instant::now() < deadline,
            "the replica has Kept within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert!(
        replica.stop_replication(),
        "the replica stopped replicating"
    );
    acknowledge_lost(&api, author).await;
    assert!(primary.down(), "the primary killed");
    assert!(replica.promote(), "the replica promoted");
    let after = format!(
        "INSERT INTO books.books (title, author_id, year, created_at, updated_at) VALUES ('After', {author}, 2021, NOW(6), NOW(6))"
    );
    assert!(replica.sql(&after), "the new history's first write");

    let (wrong, answered) = disagreements(&api, Duration::from_secs(3)).await;
    eprintln!("mariadb lossy failover: {wrong} of {answered} answers disagreed with the database");
    assert_eq!(wrong, 0, "of {answered} answers");
    let (status, _, _) = call(
        &api,
        "POST",
        "/api/books",
        &[],
        &format!("title=New&author_id={author}&year=2022"),
    )
    .await;
    assert_eq!(status, 201, "writes go to the new primary");
}
