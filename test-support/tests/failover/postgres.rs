//! A pg_auto_failover formation (a monitor, a primary, a standby) named by its libpq
//! multi-host URL: a planned switchover and a killed primary under writes with keys; a
//! process started after the switchover (the URL's first host now the standby, then
//! down) starts and writes.

use std::time::{Duration, Instant};

use books_core::{BooksApi, Config};
use books_sqlx::{AnyStore, PostgresStore, StoreSettings};
use books_test_support::{PgAutoFailover, started};

use super::{Load, call, in_process, nothing_lost_nothing_twice, seeded};

/// A formation, a migrated store over its URL, the API, and a book to read.
async fn formation() -> (PgAutoFailover, PostgresStore, BooksApi, (i64, i64)) {
    let formation = started(PgAutoFailover::start(), "a pg_auto_failover formation");
    assert!(formation.create_database("books"), "database books");
    let store = PostgresStore::connect_lazy(&formation.url("books")).expect("a multi-host URL");
    store.migrate().await.expect("migrated on the primary");
    let seeded = seeded(&store).await;
    let api = BooksApi::new(store.clone(), Config::default());
    (formation, store, api, seeded)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_pg_auto_failover),
    ignore = "pg_autoctl is not installed (.ci/install-clusters)"
)]
async fn a_planned_switchover_under_writes_loses_nothing_and_writes_resume() {
    let _one_at_a_time = super::one_at_a_time().await;
    let (formation, store, api, seeded) = formation().await;
    let load = Load::start(vec![in_process(&api)], seeded, "switchover", 8, 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let old = formation.primary_port().expect("a primary");
    let new = tokio::task::spawn_blocking(move || {
        let new = formation.switchover();
        (formation, new)
    });
    let (formation, new) = new.await.expect("the switchover");
    let new = new.expect("a new primary");
    assert_ne!(new, old);
    let accepting = Instant::now();
    let resumed = load.writes_resume(accepting, Duration::from_secs(2)).await;
    eprintln!("switchover: the first create {resumed:?} after the new primary took writes");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = load.stop().await;
    eprintln!("switchover: {:?}", seen.statuses());
    nothing_lost_nothing_twice(&store, &seen).await;

    // A process started now with the same URL: its first host is the standby.
    let url = formation.url("books");
    let author = seeded.0;
    starts_and_creates(&url, author).await;
    // And with that host down.
    let mut formation = formation;
    assert!(formation.kill_node(old), "the standby killed");
    starts_and_creates(&url, author).await;
    drop(formation);
}

/// Opens the store at `url` as the server does (`AnyStore::open`: a search for the
/// primary, then migrations there) and creates a book through the API: answered 201
/// within 30 s (a primary whose synchronous standby just died holds commits until the
/// monitor lets it go on alone).
async fn starts_and_creates(url: &str, author: i64) {
    let started = Instant::now();
    let store = AnyStore::open(url, &StoreSettings::default())
        .await
        .expect("the store opens on the primary");
    let AnyStore::Postgres(store) = store else {
        panic!("a PostgreSQL store")
    };
    let api = BooksApi::new(store, Config::default());
    let body = format!("title=restarted&author_id={author}&year=2024");
    loop {
        let (status, _, json) = call(&api, "POST", "/api/books", &[], &body).await;
        if status == 201 {
            break;
        }
        assert_eq!(status, 503, "{json}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a 201 within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "restarted: the first 201 {:?} after the start",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_pg_auto_failover),
    ignore = "pg_autoctl is not installed (.ci/install-clusters)"
)]
async fn a_killed_primary_under_writes_loses_nothing_and_writes_resume() {
    let _one_at_a_time = super::one_at_a_time().await;
    let (mut formation, store, api, seeded) = formation().await;
    let load = Load::start(vec![in_process(&api)], seeded, "killed", 8, 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let old = formation.kill_primary().expect("the primary killed");
    let (formation, new) = tokio::task::spawn_blocking(move || {
        let new = formation.wait_for_primary(Some(old), Duration::from_secs(60));
        (formation, new)
    })
    .await
    .expect("the failover");
    new.expect("the standby promoted");
    let accepting = Instant::now();
    let resumed = load.writes_resume(accepting, Duration::from_secs(2)).await;
    eprintln!("killed primary: the first create {resumed:?} after the new primary took writes");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = load.stop().await;
    eprintln!("killed primary: {:?}", seen.statuses());
    nothing_lost_nothing_twice(&store, &seen).await;
    drop(formation);
}
