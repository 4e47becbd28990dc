//! A three-node Galera cluster and two API processes whose URLs name its nodes in
//! different orders (each writes on its own first node): every create one acknowledges
//! the other reads back at once, page totals included, and no create is answered 503 for
//! a certification conflict; when a process's first node is killed, its writes go on on
//! the nodes left as soon as those have evicted it, and another process stays ready
//! throughout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use books_core::{BooksApi, Config};
use books_sqlx::MySqlStore;
use books_test_support::{Galera, started};

use super::{Load, call, in_process, nothing_lost_nothing_twice, seeded};

/// A migrated store over `galera` whose URL names the nodes in `order`.
async fn store(galera: &Galera, order: &[usize]) -> MySqlStore {
    let store = store_on(galera, order);
    store.migrate().await.expect("migrated");
    store
}

/// A store over `galera` whose URL names the nodes in `order`.
fn store_on(galera: &Galera, order: &[usize]) -> MySqlStore {
    let ports = galera.ports();
    let hosts: Vec<String> = order
        .iter()
        .map(|&i| format!("127.0.0.1:{}", ports[i]))
        .collect();
    let url = format!("mysql://root@{}/books", hosts.join(","));
    MySqlStore::connect_lazy(&url).expect("a multi-host URL")
}

/// A cluster with database `books`.
fn cluster() -> Galera {
    let galera = started(Galera::start(3), "a three-node Galera cluster");
    assert!(
        galera.sql(0, "CREATE DATABASE books").is_some(),
        "database books"
    );
    galera
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_galera),
    ignore = "Galera is not installed (.ci/install-clusters)"
)]
async fn galera_creates_are_read_back_exactly_on_another_node() {
    let _one_at_a_time = super::one_at_a_time().await;
    let galera = cluster();
    let first = store(&galera, &[0, 1, 2]).await;
    let (author, _) = seeded(&first).await;
    let second = store(&galera, &[1, 2, 0]).await;
    let apis = [
        BooksApi::new(first, Config::default()),
        BooksApi::new(second, Config::default()),
    ];
    let acknowledged = Arc::new(AtomicU64::new(1));
    let mut tasks = Vec::new();
    for writer in 0..4 {
        let (writes, reads) = (apis[writer % 2].clone(), apis[(writer + 1) % 2].clone());
        let acknowledged = acknowledged.clone();
        tasks.push(tokio::spawn(async move {
            let (mut stale, mut short) = (0, 0);
            for n in 0..40 {
                let body = format!("title=galera-{writer}-{n}&author_id={author}&year=2020");
                let (status, _, json) = call(&writes, "POST", "/api/books", &[], &body).await;
                assert_eq!(
                    status, 201,
                    "no create refused in a healthy cluster: {json}"
                );
                let at_least = acknowledged.fetch_add(1, Ordering::SeqCst) + 1;
                let id = json["id"].as_i64().unwrap();
                let (status, _, _) =
                    call(&reads, "GET", &format!("/api/books/{id}"), &[], "").await;
                stale += u32::from(status != 200);
                let (status, _, page) = call(&reads, "GET", "/api/books", &[], "").await;
                assert_eq!(status, 200);
                short += u32::from(page["meta"]["total"].as_u64().unwrap() < at_least);
            }
            (stale, short)
        }));
    }
    let (mut stale, mut short) = (0, 0);
    for task in tasks {
        let (s, t) = task.await.expect("a writer");
        (stale, short) = (stale + s, short + t);
    }
    eprintln!("galera: {stale} stale read-backs and {short} short totals of 160 each");
    assert_eq!(
        (stale, short),
        (0, 0),
        "read-backs and totals on the other node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_galera),
    ignore = "Galera is not installed (.ci/install-clusters)"
)]
async fn galera_writes_go_on_when_the_first_node_is_killed() {
    let _one_at_a_time = super::one_at_a_time().await;
    let mut galera = cluster();
    let store = store(&galera, &[0, 1, 2]).await;
    let seeded = seeded(&store).await;
    let api = BooksApi::new(store.clone(), Config::default());
    // Another process, writing on node 1.
    let other = BooksApi::new(store_on(&galera, &[1, 2, 0]), Config::default());
    assert!(other.ready().await.is_ok(), "the other process is ready");
    let load = Load::start(vec![in_process(&api)], seeded, "galera", 8, 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = Instant::now();
    assert!(galera.kill(0), "node 0 killed");
    // Writes on any node wait until the others have evicted it (`evs.suspect_timeout`);
    // the other process stays ready meanwhile (its node is Synced, in the primary
    // component, and answers without waiting for the cluster).
    let evicting = tokio::task::spawn_blocking(move || {
        let evicted = galera.wait_synced(1, Duration::from_secs(30));
        assert!(evicted, "nodes 1 and 2 form a cluster of two within 30 s");
        galera
    });
    let mut readiness = Vec::new();
    while !evicting.is_finished() {
        let asked = Instant::now();
        let ready = tokio::time::timeout(Duration::from_secs(1), other.ready()).await;
        readiness.push((ready.is_ok_and(|r| r.is_ok()), asked.elapsed()));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let galera = evicting.await.expect("the eviction");
    let evicted = Instant::now();
    let unready: Vec<_> = readiness.iter().filter(|(ready, _)| !ready).collect();
    assert!(
        unready.is_empty(),
        "the other process ready throughout the eviction: {unready:?} of {}",
        readiness.len()
    );
    let resumed = load.writes_resume(evicted, Duration::from_secs(2)).await;
    eprintln!(
        "galera: the cluster of two {:?} after the kill, the first create {resumed:?} after that",
        evicted - killed
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = load.stop().await;
    eprintln!("galera node killed: {:?}", seen.statuses());
    nothing_lost_nothing_twice(&store, &seen).await;
    drop(galera);
}
