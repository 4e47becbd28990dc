//! Faults on the way to the database: nothing listening, a silent path, a cut one.

use super::*;
use books_sqlx::RETRY_AFTER;

/// A store of a fresh migrated schema that reaches the server through `port` (where
/// nothing listens until a [`Proxy`] does), and the real server's address.
async fn migrated_behind(cleanup: &Cleanup, port: u16) -> (PostgresStore, String) {
    let options = fresh_options(cleanup).await;
    let real = format!("{}:{}", options.get_host(), options.get_port());
    PostgresStore::connect_lazy_with(options.clone())
        .migrate()
        .await
        .unwrap();
    let store = PostgresStore::connect_lazy_with(options.host("127.0.0.1").port(port));
    (store, real)
}

/// A store pointed at a port where nothing listens answers 503; once a server answers
/// there (a proxy to the real one), the same store works without a restart.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_503_then_recovers() {
    let cleanup = cleanup();
    let port = free_port();
    let (store, real) = migrated_behind(&cleanup, port).await;
    let api = BooksApi::new(store, Config::default());

    let started = Instant::now();
    assert_eq!(get(&api, "/api/books").await, 503);
    assert_eq!(get(&api, "/api/books/1").await, 503);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "fails fast: {:?}",
        started.elapsed()
    );
    assert_eq!(get(&api, "/api/ping").await, 200);
    assert!(
        matches!(api.ready().await, Err(StoreError::Unavailable(_))),
        "not ready while nothing listens"
    );

    // A search that found no server refuses requests for RETRY_AFTER; the next looks again.
    let _proxy = Proxy::start(port, real).await;
    tokio::time::sleep(RETRY_AFTER).await;
    assert_eq!(get(&api, "/api/books").await, 200);
    assert_eq!(get(&api, "/api/books/1").await, 404);
    api.ready().await.expect("ready once the server answers");
}

/// The version check runs on a connection of its own: when the way to the database goes
/// silent, a check gives up within its bound (503, not a hang) and the next one, once
/// the path is back, opens a fresh connection; cut off, checks fail until the database
/// can be reached again.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_check_connection_recovers() {
    let cleanup = cleanup();
    let port = free_port();
    let (store, real) = migrated_behind(&cleanup, port).await;
    let proxy = Proxy::start(port, real.clone()).await;
    let version = store.version().await.unwrap();
    let unavailable = |result| matches!(result, Err(StoreError::Unavailable(_)));

    proxy.silence(true);
    let started = Instant::now();
    assert!(unavailable(store.version().await), "silent path");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gives up: {:?}",
        started.elapsed()
    );
    proxy.silence(false);
    tokio::time::sleep(RETRY_AFTER).await;
    assert_eq!(store.version().await.unwrap(), version, "path back");

    drop(proxy);
    assert!(unavailable(store.version().await), "cut off");
    assert!(unavailable(store.version().await), "still cut off");
    let _proxy = Proxy::start(port, real).await;
    tokio::time::sleep(RETRY_AFTER).await;
    assert_eq!(store.version().await.unwrap(), version, "reachable again");
}

/// A database that stops accepting connections (`ALLOW_CONNECTIONS false`, its backends
/// terminated, as an operator closing it for maintenance does): reads and writes answer
/// 503 with `Retry-After`, never 500, directly and through PgBouncer (whose login to the
/// server fails), and work again once it accepts connections.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_closing_its_doors_is_503() {
    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
    let mut admin = PgConnection::connect(&url()).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let options = PostgresStore::options(&url()).unwrap().database(&database);
    let direct = PostgresStore::connect_lazy_with(options.clone());
    direct.migrate().await.unwrap();
    let mut apis = vec![("direct", BooksApi::new(direct, Config::default()))];
    if let Some(port) = super::pooler::bouncer_port() {
        let pooled = PostgresStore::connect_lazy_with(options.host("127.0.0.1").port(port))
            .transaction_pooler(true);
        apis.push(("pooled", BooksApi::new(pooled, Config::default())));
    }
    for (way, api) in &apis {
        assert_eq!(get(api, "/api/books").await, 200, "{way}");
    }

    sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER DATABASE {database} ALLOW_CONNECTIONS false"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    // Termination is a signal, and a connection that was starting up as the door closed
    // may still get in: terminate until none is left (10 s at most).
    let terminated = format!(
        "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sqlx::query_scalar::<_, i64>(AssertSqlSafe(terminated.clone()))
        .fetch_one(&mut admin)
        .await
        .unwrap()
        > 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "backends of {database} still there 10 s after they were terminated"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for (way, api) in &apis {
        for path in ["/api/books", "/api/books/1", "/api/books?page=2"] {
            let request = http::Request::get(path).body(String::new()).unwrap();
            let response = api.handle(request).await;
            assert_eq!(
                response.status(),
                503,
                "{way} {path}: {:?}",
                response.body()
            );
            assert_eq!(response.headers()["retry-after"], "1");
        }
        let create = http::Request::post("/api/books")
            .body("title=T&author_id=1&year=2020".to_owned())
            .unwrap();
        assert_eq!(api.handle(create).await.status(), 503, "{way} create");
        assert!(matches!(api.ready().await, Err(StoreError::Unavailable(_))));
    }

    sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER DATABASE {database} ALLOW_CONNECTIONS true"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    for (way, api) in &apis {
        let started = Instant::now();
        while get(api, "/api/books").await != 200 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{way} recovers"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drop(apis);
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP DATABASE {database} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}

/// Under a host's `serializable` connections, a write that PostgreSQL rolls back because
/// a host's transaction changed the same book first (SQLSTATE 40001) is sent once more
/// and goes through once the host commits: a plain update and a conditional one alike.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_lost_a_serialization_conflict_is_sent_once_more() {
    use books_core::store::{AuthorStore, BookInput, Conditional, ConditionalWrites};
    use chrono::Utc;
    let cleanup = cleanup();
    let options = fresh_options(&cleanup).await;
    let plain = PostgresStore::connect_lazy_with(options.clone());
    plain.migrate().await.unwrap();
    let store = PostgresStore::connect_lazy_with(
        options
            .clone()
            .options([("default_transaction_isolation", "serializable")]),
    );
    let author = store.add_author(Some("A")).await.unwrap();
    let book = BookInput {
        title: "Contested".into(),
        author_id: author,
        year: 2020,
    };
    let id = store.create(&book, Utc::now()).await.unwrap().id;
    let host = PgPool::connect_with(options).await.unwrap();
    for (round, conditional) in [(1, false), (2, true)] {
        // The host changes the book first and holds its row…
        let mut host_tx = host.begin().await.unwrap();
        sqlx::query("UPDATE books SET year = year + 1 WHERE id = $1")
            .bind(id)
            .execute(&mut *host_tx)
            .await
            .unwrap();
        let host_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *host_tx)
            .await
            .unwrap();
        // …the store's write waits for the row…
        let changed = BookInput {
            title: format!("Written {round}"),
            ..book.clone()
        };
        let writer = tokio::spawn({
            let store = store.clone();
            async move {
                let now = Utc::now();
                if conditional {
                    match store.update_if(id, &changed, now, &|_| true).await? {
                        Conditional::Done(written) => Ok(written),
                        other => panic!("{other:?}"),
                    }
                } else {
                    store.update(id, &changed, now).await
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
            )
            .bind(host_pid)
            .fetch_one(&host)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "the store's write never waited");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // …and the host commits: the store's snapshot is too old for the row now.
        host_tx.commit().await.unwrap();
        let written = writer.await.unwrap().expect("sent once more");
        let written = written.expect("the book is there");
        assert_eq!(
            (written.title, written.year),
            (format!("Written {round}"), 2020),
            "the store's write, over the host's"
        );
    }
}
