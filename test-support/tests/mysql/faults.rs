//! Faults on the way to the database and in it: nothing listening, killed connections,
//! a row lock held too long, a statement over its time bound, a deadlock. Each is
//! "unavailable" (503) or, for a deadlock, a write sent once more.

use std::time::{Duration, Instant};

use books_core::BooksApi;
use books_core::store::{AuthorStore, BookInput, Conditional, ConditionalWrites};
use chrono::Utc;

use super::*;

/// A store of a fresh migrated database that reaches the server through `port` (where
/// nothing listens until a [`Proxy`] does), and the real server's address.
async fn migrated_behind(cleanup: &Cleanup, port: u16) -> (MySqlStore, String) {
    let options = options_in(&fresh_database(cleanup).await);
    let real = format!("{}:{}", options.get_host(), options.get_port());
    MySqlStore::connect_lazy_with(options.clone())
        .migrate()
        .await
        .unwrap();
    let store = MySqlStore::connect_lazy_with(options.host("127.0.0.1").port(port));
    (store, real)
}

async fn get(api: &BooksApi, path: &str) -> u16 {
    let request = http::Request::get(path).body(String::new()).unwrap();
    api.handle(request).await.status().as_u16()
}

/// A store pointed at a port where nothing listens answers 503 and is not ready; once a
/// server answers there, the same store works within 2 s, without a restart.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_503_then_recovers() {
    let cleanup = cleanup();
    let port = free_port();
    let (store, real) = migrated_behind(&cleanup, port).await;
    let api = BooksApi::new(store, Config::default());
    let started = Instant::now();
    assert_eq!(get(&api, "/api/books").await, 503);
    assert_eq!(get(&api, "/api/books/1").await, 503);
    assert!(started.elapsed() < Duration::from_secs(10), "fails fast");
    assert_eq!(get(&api, "/api/ping").await, 200);
    assert!(
        unavailable(&api.ready().await),
        "not ready while nothing listens"
    );

    let proxy = Proxy::start(port, real.clone()).await;
    // The store looks for its server again a moment after it last found none.
    let deadline = Instant::now() + Duration::from_secs(2);
    while get(&api, "/api/books").await != 200 {
        assert!(
            Instant::now() < deadline,
            "answers within 2 s of the server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.ready().await.expect("ready once the server answers");

    // Cut: every pooled connection is lost; 503 while cut. Once the path is back, each
    // dead connection fails its next statement once (503) and is replaced.
    drop(proxy);
    assert_eq!(get(&api, "/api/books/1").await, 503);
    let _proxy = Proxy::start(port, real).await;
    let mut statuses = Vec::new();
    while statuses.last() != Some(&404) && statuses.len() < 12 {
        statuses.push(get(&api, "/api/books/1").await);
    }
    assert!(
        statuses.iter().all(|s| [503, 404].contains(s)),
        "{statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&404), "{statuses:?}");
}

/// Connections the server killed (an operator's `KILL`, a failover) fail their next
/// statement as unavailable, and are replaced: the call after works.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_are_503_then_replaced() {
    let cleanup = cleanup();
    let (store, _, host) = two_stores_and_a_host(&cleanup).await;
    let author = store.add_author(None).await.unwrap();
    let database = database_of(&store);
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()",
    )
    .bind(&database)
    .fetch_all(&host)
    .await
    .unwrap();
    assert!(!ids.is_empty());
    for id in ids {
        let _ = sqlx::raw_sql(AssertSqlSafe(format!("KILL CONNECTION {id}")))
            .execute(&host)
            .await;
    }
    let mut outcomes = Vec::new();
    for _ in 0..12 {
        outcomes.push(store.author_exists(author).await);
    }
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Ok(true)) || unavailable(o)),
        "{outcomes:?}"
    );
    assert!(matches!(outcomes.last(), Some(Ok(true))), "{outcomes:?}");
}

/// A write that waits on a row lock a host holds gives up at the store's bound
/// (`innodb_lock_wait_timeout`, error 1205): 503, and the book is as it was.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_lock_held_too_long_is_503() {
    let cleanup = cleanup();
    let (store, _, host) = two_stores_and_a_host(&cleanup).await;
    let author = store.add_author(None).await.unwrap();
    let book = BookInput {
        title: "Held".into(),
        author_id: author,
        year: 2020,
    };
    let id = store.create(&book, Utc::now()).await.unwrap().id;
    let mut holder = host.begin().await.unwrap();
    sqlx::query("SELECT id FROM books WHERE id = ? FOR UPDATE")
        .bind(id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let started = Instant::now();
    let changed = BookInput {
        title: "Changed".into(),
        ..book
    };
    let updated = store.update(id, &changed, Utc::now()).await;
    assert!(unavailable(&updated), "{updated:?}");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    holder.rollback().await.unwrap();
    assert_eq!(store.get(id).await.unwrap().unwrap().title, "Held");
}

/// A statement over the session's time bound (`max_statement_time`, error 1969) is
/// unavailable: here a host's pool with a bound of a tenth of a second, and a host's
/// trigger that makes inserts slow.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_over_its_time_bound_is_503() {
    let cleanup = cleanup();
    let (store, _, host) = two_stores_and_a_host(&cleanup).await;
    let author = store.add_author(None).await.unwrap();
    sqlx::raw_sql("CREATE TRIGGER slow BEFORE INSERT ON books FOR EACH ROW DO SLEEP(1)")
        .execute(&host)
        .await
        .unwrap();
    let bounded = sqlx::mysql::MySqlPoolOptions::new()
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::raw_sql("SET SESSION max_statement_time = 0.1")
                    .execute(conn)
                    .await
                    .map(drop)
            })
        })
        .connect_with(options_in(&database_of(&store)))
        .await
        .unwrap();
    let store = MySqlStore::from_pool(bounded);
    let book = BookInput {
        title: "Slow".into(),
        author_id: author,
        year: 2020,
    };
    let created = store.create(&book, Utc::now()).await;
    assert!(unavailable(&created), "{created:?}");
}

/// A conditional write that deadlocks with a host's transaction (InnoDB rolls the store's
/// back) is sent once more and goes through once the host commits.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlocked_write_is_sent_once_more() {
    let cleanup = cleanup();
    let (store, _, host) = two_stores_and_a_host(&cleanup).await;
    let author = store.add_author(Some("A")).await.unwrap();
    let book = BookInput {
        title: "Contested".into(),
        author_id: author,
        year: 2020,
    };
    let id = store.create(&book, Utc::now()).await.unwrap().id;
    // The host renames the author first (holding its row)…
    let mut host_tx = host.begin().await.unwrap();
    sqlx::query("UPDATE authors SET name = 'B' WHERE id = ?")
        .bind(author)
        .execute(&mut *host_tx)
        .await
        .unwrap();
    // …the store locks the book and waits for the author's row…
    let writer = tokio::spawn({
        let store = store.clone();
        let changed = BookInput {
            title: "Written".into(),
            ..book
        };
        async move { store.update_if(id, &changed, Utc::now(), &|_| true).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // …and the host wants the book: a deadlock, in which the store's transaction (which
    // changed nothing yet) is rolled back.
    sqlx::query("SELECT id FROM books WHERE id = ? FOR UPDATE")
        .bind(id)
        .execute(&mut *host_tx)
        .await
        .expect("the host's transaction goes on");
    host_tx.commit().await.unwrap();
    let written = writer.await.unwrap().expect("sent once more");
    let Conditional::Done(Some(written)) = written else {
        panic!("{written:?}");
    };
    assert_eq!(
        (written.title.as_str(), written.author_name.as_deref()),
        ("Written", Some("B"))
    );
}

/// The version check runs on a connection of its own: when the way to the database goes
/// silent, a check gives up within its bound (503, not a hang), and the next one, once
/// the path is back, opens a fresh connection.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_check_connection_recovers() {
    use books_core::store::Versions;
    let cleanup = cleanup();
    let port = free_port();
    let (store, real) = migrated_behind(&cleanup, port).await;
    let proxy = Proxy::start(port, real).await;
    let version = store.version().await.unwrap();
    proxy.silence(true);
    let started = Instant::now();
    assert!(unavailable(&store.version().await), "silent path");
    assert!(started.elapsed() < Duration::from_secs(10), "gives up");
    proxy.silence(false);
    assert_eq!(store.version().await.unwrap(), version, "path back");
}
