//! The server binary on the databases' scale-out machinery, each test on private servers
//! of its own: behind PgBouncer in transaction mode (sequential and parallel CRUD;
//! PgBouncer restarted under load: 503 with `Retry-After` while it is gone, never 500,
//! answers again within a second of its return), and two processes — one writing, one
//! reading with a replica that applies commits late (PostgreSQL: 300 ms, MariaDB: a
//! second) — with zero stale reads and the replica serving the reads of settled data
//! (per `/metrics`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use books_test_support::{Cluster, MariaDb, PgBouncer, started};
use serde_json::Value;

mod common;

/// The server binary, killed when dropped.
struct Server {
    _child: tokio::process::Child,
    addr: SocketAddr,
}

async fn start(args: &[&str]) -> Server {
    let (child, addr) = common::server(args).await;
    Server {
        _child: child,
        addr,
    }
}

/// One request on a new connection, its body as JSON.
async fn call(addr: SocketAddr, method: &str, path: &str, body: &str) -> Answer {
    let answer = common::call(addr, method, path, &[], body).await;
    Answer {
        status: answer.status,
        retry_after: answer.header("retry-after").map(str::to_owned),
        body: answer.json(),
    }
}

/// An answer: status, `Retry-After`, and the body as JSON (or as text).
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

/// A private primary and PgBouncer in front of it.
fn cluster_behind_pgbouncer() -> (Cluster, PgBouncer) {
    let cluster = started(
        Cluster::start(),
        "a private PostgreSQL cluster (initdb, pg_ctl)",
    );
    let bouncer = PgBouncer::start(cluster.primary().port());
    (cluster, started(bouncer, "PgBouncer"))
}

/// The ids of two authors of the demo data (some of its authors were removed).
async fn two_authors(addr: SocketAddr) -> (i64, i64) {
    let page = call(addr, "GET", "/api/books?include=author", "")
        .await
        .body;
    let mut ids = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|book| book["author"]["id"].as_i64());
    (ids.next().unwrap(), ids.next().unwrap())
}

/// A create, read, update, read, delete, read of one book, each answer as the contract
/// says.
async fn crud(addr: SocketAddr, n: usize) {
    let (first, second) = two_authors(addr).await;
    let created = call(
        addr,
        "POST",
        "/api/books?include=author",
        &format!("title=Book {n}&author_id={first}&year=2020"),
    )
    .await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["id"].as_i64().unwrap();
    let path = format!("/api/books/{id}");
    let got = call(addr, "GET", &format!("{path}?include=author"), "").await;
    assert_eq!(got.body["title"], format!("Book {n}"), "{got:?}");
    assert_eq!(got.body["author"]["id"], first);
    let put = call(
        addr,
        "PUT",
        &path,
        &format!("title=Renamed {n}&author_id={second}&year=2021"),
    )
    .await;
    assert_eq!(put.status, 200, "{put:?}");
    let got = call(addr, "GET", &path, "").await;
    assert_eq!(got.body["title"], format!("Renamed {n}"), "{got:?}");
    assert_eq!(call(addr, "DELETE", &path, "").await.status, 200);
    assert_eq!(call(addr, "GET", &path, "").await.status, 404);
}

/// The README's server through PgBouncer in transaction mode: it starts (migrations and
/// demo data through the pooler) and serves CRUD, one client after another and 32 at
/// once, with exact totals.
#[cfg_attr(
    not(all(books_test_pg_cluster, books_test_pgbouncer)),
    ignore = "needs PostgreSQL's server tools and PgBouncer"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_through_pgbouncer_in_transaction_mode() {
    let (_cluster, bouncer) = cluster_behind_pgbouncer();
    let url = bouncer.url("postgres");
    let server = start(&["--database-url", &url, "--transaction-pooler", "true"]).await;
    let addr = server.addr;
    assert_eq!(
        call(addr, "GET", "/api/books", "").await.body["meta"]["total"],
        45
    );
    for n in 0..5 {
        crud(addr, n).await;
    }
    let clients = (0..32).map(|n| tokio::spawn(crud(addr, 100 + n)));
    for client in clients {
        client.await.expect("every answer as the contract says");
    }
    assert_eq!(
        call(addr, "GET", "/api/books", "").await.body["meta"]["total"],
        45
    );
    assert_eq!(call(addr, "GET", "/readyz", "").await.status, 200);
    // A second process migrates (finds it done) and serves the same data.
    let again = start(&["--database-url", &url, "--transaction-pooler", "true"]).await;
    assert_eq!(
        call(again.addr, "GET", "/api/books", "").await.body["meta"]["total"],
        45
    );
}

/// PgBouncer killed and started again under reads and writes: while it is gone every
/// answer is 503 with `Retry-After` (none is a 500; a request waits up to 3 s for a
/// connection first, so one in flight as PgBouncer returns succeeds), and within a
/// second of its return every answer succeeds again.
#[cfg_attr(
    not(all(books_test_pg_cluster, books_test_pgbouncer)),
    ignore = "needs PostgreSQL's server tools and PgBouncer"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_restarted_under_load() {
    let (_cluster, mut bouncer) = cluster_behind_pgbouncer();
    let url = bouncer.url("postgres");
    let server = start(&["--database-url", &url, "--transaction-pooler", "true"]).await;
    let addr = server.addr;
    let (author, _) = two_authors(addr).await;
    let answers: Arc<Mutex<Vec<(Instant, Instant, Answer)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|client| {
            let (answers, stop) = (answers.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = client;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sent = Instant::now();
                    let answer = if n % 4 == 0 {
                        let body = format!("title=Load {n}&author_id={author}&year=2020");
                        call(addr, "POST", "/api/books", &body).await
                    } else {
                        let path = format!("/api/books?page={}&include=author", n % 3 + 1);
                        call(addr, "GET", &path, "").await
                    };
                    answers.lock().unwrap().push((sent, Instant::now(), answer));
                    n += 8;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(800)).await;
    bouncer.down();
    let gone = Instant::now();
    // Longer than a checkout waits for a refused connection to be accepted (3 s).
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let returning = Instant::now();
    assert!(bouncer.up(), "PgBouncer starts again");
    let back = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }

    let answers = answers.lock().unwrap();
    for (sent, done, answer) in answers.iter() {
        match answer.status {
            200 | 201 => {}
            503 => assert_eq!(answer.retry_after.as_deref(), Some("1"), "{answer:?}"),
            _ => panic!("never anything but success or 503: {answer:?}"),
        }
        // An answer that waited through the return may succeed (latency, not an error).
        if *sent > gone + Duration::from_millis(100) && *done < returning {
            assert_eq!(answer.status, 503, "while PgBouncer is gone: {answer:?}");
        }
        if *sent > back + Duration::from_secs(1) {
            assert!(
                answer.status < 300,
                "answers again a second after: {answer:?}"
            );
        }
    }
    let while_gone = answers
        .iter()
        .filter(|(_, done, _)| *done > gone && *done < back);
    assert!(
        while_gone.count() > 0,
        "answers came while PgBouncer was gone"
    );
    let after = answers
        .iter()
        .filter(|(sent, ..)| *sent > back + Duration::from_secs(1));
    assert!(after.count() > 20, "the load went on after its return");
}

/// The value of the Prometheus sample `name{labels…}` in `text`, 0 when absent.
fn sample(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            (series == format!("{name}{{{label}}}")).then(|| value.parse().ok())?
        })
        .unwrap_or(0.0)
}

/// What a scale-out test needs of a private primary with one replica.
struct Replicated {
    primary: String,
    replica: String,
    replica_port: u16,
    /// A host's own `UPDATE books SET title = … WHERE id = 2` on the primary.
    retitle: Box<dyn Fn(String) -> futures_util::future::BoxFuture<'static, ()>>,
}

/// Two processes over a private primary: one writes (and the host's own SQL writes
/// besides), the other reads with a replica that applies every commit late. Every read
/// that follows an acknowledged write sees it (zero stale reads, though the replica
/// itself is behind); once writes settle, the replica serves the reads the cache lacks,
/// as the reader's `/metrics` shows.
async fn two_processes_read_nothing_stale(cluster: Replicated, settle: Duration) {
    let Replicated {
        primary,
        replica,
        replica_port,
        retitle,
    } = cluster;
    let writer = start(&["--database-url", &primary]).await;
    let reader = start(&["--database-url", &primary, "--replica-url", &replica]).await;
    let (first, second) = two_authors(writer.addr).await;

    let mut stale = Vec::new();
    for n in 0..24 {
        let title = format!("Version {n}");
        let id = match n % 3 {
            0 => {
                let body = format!("title={title}&author_id={first}&year=2020");
                let created = call(writer.addr, "POST", "/api/books", &body).await;
                assert_eq!(created.status, 201, "{created:?}");
                created.body["id"].as_i64().unwrap()
            }
            1 => {
                let body = format!("title={title}&author_id={second}&year=2021");
                assert_eq!(
                    call(writer.addr, "PUT", "/api/books/1", &body).await.status,
                    200
                );
                1
            }
            _ => {
                retitle(title.clone()).await;
                2
            }
        };
        let book = call(
            reader.addr,
            "GET",
            &format!("/api/books/{id}?include=author"),
            "",
        )
        .await;
        if book.body["title"] != title.as_str() {
            stale.push(format!(
                "book {id} after write {n}: {:?}",
                book.body["title"]
            ));
        }
        let page = call(reader.addr, "GET", "/api/books?page=3", "").await;
        let total = 45 + n / 3 + 1;
        if page.body["meta"]["total"] != total {
            stale.push(format!(
                "total after write {n}: {}",
                page.body["meta"]["total"]
            ));
        }
    }
    assert_eq!(stale, Vec::<String>::new(), "zero stale reads");

    // Settled: reads of what the cache does not hold go to the replica.
    tokio::time::sleep(settle).await;
    let metrics = async || call(reader.addr, "GET", "/metrics", "").await.body;
    let before = metrics().await;
    let before = before.as_str().unwrap();
    for id in 10..40 {
        assert_eq!(
            call(reader.addr, "GET", &format!("/api/books/{id}"), "")
                .await
                .status,
            200
        );
    }
    for page in 1..=3 {
        let path = format!("/api/books?page={page}&include=author");
        assert_eq!(call(reader.addr, "GET", &path, "").await.status, 200);
    }
    let after = metrics().await;
    let after = after.as_str().unwrap();
    let delta = |label| {
        sample(after, "books_store_reads_total", label)
            - sample(before, "books_store_reads_total", label)
    };
    let (replica_reads, primary_reads) = (delta("pool=\"replica\""), delta("pool=\"primary\""));
    assert!(
        replica_reads >= 30.0 && replica_reads > 10.0 * primary_reads,
        "the replica serves the settled reads: {replica_reads} replica, {primary_reads} primary"
    );
    let up = format!("replica=\"127.0.0.1:{replica_port}\"");
    assert_eq!(sample(after, "books_store_replica_up", &up), 1.0, "{after}");
}

/// PostgreSQL: a streaming replica 300 ms late.
#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_a_lagging_replica_read_nothing_stale() {
    let mut cluster = started(
        Cluster::start(),
        "a private PostgreSQL cluster (initdb, pg_ctl)",
    );
    let primary = cluster.primary().url();
    let replica = cluster
        .add_replica(Duration::from_millis(300))
        .expect("a streaming replica starts")
        .url();
    let host = books_sqlx::sqlx::PgPool::connect(&primary).await.unwrap();
    let replicated = Replicated {
        primary,
        replica,
        replica_port: cluster.replicas()[0].port(),
        retitle: Box::new(move |title| {
            let host = host.clone();
            Box::pin(async move {
                books_sqlx::sqlx::query("UPDATE books SET title = $1 WHERE id = 2")
                    .bind(title)
                    .execute(&host)
                    .await
                    .unwrap();
            })
        }),
    };
    two_processes_read_nothing_stale(replicated, Duration::from_secs(1)).await;
}

/// MariaDB: a GTID replica a second late (`MASTER_DELAY`).
#[cfg_attr(
    not(books_test_mariadb_servers),
    ignore = "needs MariaDB's server tools (mariadbd, mariadb-install-db)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_a_lagging_mariadb_replica_read_nothing_stale() {
    let primary = started(MariaDb::primary(), "a private MariaDB server (mariadbd)");
    assert!(primary.sql("CREATE DATABASE books"));
    let replica = started(
        MariaDb::replica_of(&primary, Duration::from_secs(1)),
        "a MariaDB replica",
    );
    let host = books_sqlx::sqlx::MySqlPool::connect(&primary.url("books"))
        .await
        .unwrap();
    let replicated = Replicated {
        primary: primary.url("books"),
        replica: replica.url("books"),
        replica_port: replica.port(),
        retitle: Box::new(move |title| {
            let host = host.clone();
            Box::pin(async move {
                books_sqlx::sqlx::query("UPDATE books SET title = ? WHERE id = 2")
                    .bind(title)
                    .execute(&host)
                    .await
                    .unwrap();
            })
        }),
    };
    two_processes_read_nothing_stale(replicated, Duration::from_millis(2500)).await;
}
