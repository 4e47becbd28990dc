//! The PostgreSQL store against the shared suites, in a fresh schema per test, and what
//! only PostgreSQL has: one module per topic.
//!
//! The server comes from `BOOKS_TEST_POSTGRES_URL` (for example
//! `postgres://postgres@127.0.0.1:5432/test`). Without it the tests skip with a message,
//! except under `CI=true`, where a skip is a failure. The pooler and replica tests start
//! what they need themselves (`books-test-support`).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use books_core::BookStore;
use books_core::testing::InProcess;
use books_core::{BooksApi, Config, StoreError};
use books_sqlx::sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use books_sqlx::sqlx::{self, AssertSqlSafe, Connection, PgConnection};
use books_sqlx::{MIGRATIONS_TABLE, PostgresStore, push};
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
                    claim_run(conn).await;
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

/// This run's number: its schemas are `books_test_<run>_<n>`.
fn run() -> u32 {
    static RUN: OnceLock<u32> = OnceLock::new();
    *RUN.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        (std::process::id() ^ nanos.rotate_left(16)) & 0x7fff_ffff
    })
}

/// Holds an advisory lock named by this run for as long as the process lives (the
/// connection is kept, never closed), then drops the schemas of every run whose lock
/// nobody holds: runs that ended. A run going on in parallel keeps its schemas.
async fn claim_run(mut conn: PgConnection) {
    sqlx::query("SELECT pg_advisory_lock($1, $2)")
        .bind(LOCK_SPACE)
        .bind(run() as i32)
        .execute(&mut conn)
        .await
        .expect("lock this run");
    // Schemas, and the databases of the tests that need one of their own.
    let schemas: Vec<String> = sqlx::query_scalar(
        "SELECT 's' || nspname::text FROM pg_namespace WHERE nspname LIKE 'books\\_test\\_%' \
         UNION ALL SELECT 'd' || datname::text FROM pg_database \
         WHERE datname LIKE 'books\\_test\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("list schemas");
    let mut cleaner = PgConnection::connect(&url()).await.expect("connect");
    for kind_and_name in schemas {
        let (kind, schema) = kind_and_name.split_at(1);
        let Some(owner) = schema
            .strip_prefix(SCHEMA_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|run| run.parse::<i32>().ok())
        else {
            continue;
        };
        let ended: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
            .bind(LOCK_SPACE)
            .bind(owner)
            .fetch_one(&mut cleaner)
            .await
            .expect("probe a run's lock");
        if ended {
            let drop = if kind == "d" {
                format!("DROP DATABASE IF EXISTS {schema} WITH (FORCE)")
            } else {
                format!("DROP SCHEMA IF EXISTS {schema} CASCADE")
            };
            sqlx::query(AssertSqlSafe(drop))
                .execute(&mut cleaner)
                .await
                .expect("drop an ended run's schema");
            sqlx::query("SELECT pg_advisory_unlock($1, $2)")
                .bind(LOCK_SPACE)
                .bind(owner)
                .execute(&mut cleaner)
                .await
                .expect("unlock");
        }
    }
    // Kept open to the end of the process: the lock says this run is alive.
    std::mem::forget(conn);
}

/// The first key of this suite's advisory locks (the second is the run).
const LOCK_SPACE: i32 = 0x626f6f6b; // "book"

fn url() -> String {
    std::env::var(URL_VAR).expect("checked by available()")
}

/// A new schema name for one test of this run.
fn fresh_schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{SCHEMA_PREFIX}{}_{}",
        run(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a new empty schema and returns options whose `search_path` is it.
async fn fresh_options() -> PgConnectOptions {
    let schema = fresh_schema();
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .expect("create schema");
    PostgresStore::options(&url())
        .expect("options")
        .options([("search_path", schema.as_str())])
}

/// A migrated store with its tables in a schema of its own.
async fn fresh() -> PostgresStore {
    let store = PostgresStore::connect_lazy(&url())
        .expect("options")
        .in_schema(&fresh_schema())
        .expect("schema name");
    store.migrate().await.expect("migrate");
    store
}

#[path = "../common/mod.rs"]
mod common;
use common::{api_works, cache_is_exact_across_writers, host_migrator};

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

/// Two stores on one schema, as two API processes would have, the schema, and the
/// host's own pool.
async fn two_stores_and_a_host() -> (PostgresStore, PostgresStore, String, PgPool) {
    let ours = fresh().await;
    let schema = ours.schema().expect("a schema").to_owned();
    let theirs = PostgresStore::connect_lazy(&url())
        .unwrap()
        .in_schema(&schema)
        .unwrap();
    let host = PgPool::connect(&url()).await.unwrap();
    (ours, theirs, schema, host)
}

async fn host_sql(host: &PgPool, schema: &str, sql: &str, author: i64) {
    sqlx::query(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
        .bind(author)
        .execute(host)
        .await
        .unwrap();
}

mod batching;
mod exactness;
mod faults;
mod migrations;
mod pooler;
mod proxy;
mod replicas;
use proxy::{Proxy, free_port};
mod push_mode;
