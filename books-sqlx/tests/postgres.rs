//! The PostgreSQL store against the shared suites, in a fresh schema per test.
//!
//! The server comes from `BOOKS_TEST_POSTGRES_URL` (for example
//! `postgres://postgres@127.0.0.1:5432/test`). Without it the tests skip with a message,
//! except under `CI=true`, where a skip is a failure.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use books_core::testing::InProcess;
use books_core::{BooksApi, Config};
use books_sqlx::PostgresStore;
use books_sqlx::sqlx::postgres::PgConnectOptions;
use books_sqlx::sqlx::{self, Connection, PgConnection};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OnceCell;

const URL_VAR: &str = "BOOKS_TEST_POSTGRES_URL";

/// Whether the PostgreSQL tests can run; panics under CI when they cannot.
async fn available() -> bool {
    static CHECKED: OnceCell<bool> = OnceCell::const_new();
    *CHECKED
        .get_or_init(|| async {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
            let Ok(url) = std::env::var(URL_VAR) else {
                assert!(
                    !in_ci,
                    "{URL_VAR} is not set: PostgreSQL tests cannot be skipped in CI"
                );
                loud(&format!("set {URL_VAR} (see README)"));
                return false;
            };
            match PgConnection::connect(&url).await {
                Ok(conn) => {
                    drop_old_schemas(conn).await;
                    true
                }
                Err(error) => {
                    assert!(
                        !in_ci,
                        "PostgreSQL at {URL_VAR} is unreachable in CI: {error}"
                    );
                    loud(&error.to_string());
                    false
                }
            }
        })
        .await
}

/// Writes past the test harness's output capture, so a skip is seen.
fn loud(why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPING PostgreSQL tests: {why} ***\n"
    );
}

const SCHEMA_PREFIX: &str = "books_test_";

/// Removes the schemas earlier runs left behind.
async fn drop_old_schemas(mut conn: PgConnection) {
    let old: Vec<String> = sqlx::query_scalar(
        "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'books\\_test\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("list schemas");
    for schema in old {
        sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .execute(&mut conn)
            .await
            .expect("drop old schema");
    }
}

fn url() -> String {
    std::env::var(URL_VAR).expect("checked by available()")
}

/// Creates a new empty schema and returns options whose `search_path` is it.
async fn fresh_options() -> PgConnectOptions {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let schema = format!(
        "{SCHEMA_PREFIX}{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut conn)
        .await
        .expect("create schema");
    PostgresStore::options(&url())
        .expect("options")
        .options([("search_path", schema.as_str())])
}

async fn fresh() -> PostgresStore {
    let store = PostgresStore::connect_lazy_with(fresh_options().await);
    store.migrate().await.expect("migrate");
    store
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite!(fresh, skip_unless = available);
}

mod http_contract {
    use super::*;
    async fn in_process(config: Config) -> InProcess<PostgresStore> {
        InProcess::new(fresh().await, config)
    }
    books_core::http_contract_suite!(in_process, skip_unless = available);
}

async fn get(api: &BooksApi, path: &str) -> u16 {
    let request = http::Request::get(path).body(String::new()).unwrap();
    api.handle(request).await.status().as_u16()
}

/// A store pointed at a port where nothing listens answers 503; once a server answers
/// there (a proxy to the real one), the same store works without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_503_then_recovers() {
    if !available().await {
        return;
    }
    let options = fresh_options().await;
    let real = format!("{}:{}", options.get_host(), options.get_port());
    PostgresStore::connect_lazy_with(options.clone())
        .migrate()
        .await
        .unwrap();

    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = PostgresStore::connect_lazy_with(options.host("127.0.0.1").port(port));
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

    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let proxy = tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let real = real.clone();
            tokio::spawn(async move {
                let mut server = TcpStream::connect(real).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    assert_eq!(get(&api, "/api/books").await, 200);
    assert_eq!(get(&api, "/api/books/1").await, 404);
    proxy.abort();
}
