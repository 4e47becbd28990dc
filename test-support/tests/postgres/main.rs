//! The PostgreSQL store against the shared suites, in a fresh schema per test, and what
//! only PostgreSQL has: one module per topic.
//!
//! The server comes from `BOOKS_TEST_POSTGRES_URL` (for example
//! `postgres://postgres@127.0.0.1:5432/test`). Without it every case shows as ignored
//! (`build.rs`), except under `CI=true`, where it runs and fails. The pooler and replica
//! tests start what they need themselves (`books-test-support`). Each test drops the
//! schemas it made when it ends ([`cleanup`]).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use books_core::store::{BookStore, StoreError, Versions};
use books_core::testing::InProcess;
use books_core::testing::store_cases::OutsideWrite;
use books_core::{BooksApi, Config};
use books_sqlx::sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use books_sqlx::sqlx::{self, AssertSqlSafe, Connection, PgConnection};
use books_sqlx::{MIGRATIONS_TABLE, PostgresStore, push};
use tokio::sync::OnceCell;

const URL_VAR: &str = "BOOKS_TEST_POSTGRES_URL";

/// The test server's URL (the cases run only when it is given, or under `CI=true`).
fn url() -> String {
    std::env::var(URL_VAR)
        .unwrap_or_else(|_| panic!("{URL_VAR} is not set: CI=true runs the PostgreSQL tests"))
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

/// Claims this run once (and drops what runs that ended without cleaning up left).
async fn claim() {
    static CLAIMED: OnceCell<()> = OnceCell::const_new();
    CLAIMED
        .get_or_init(|| async {
            let conn = PgConnection::connect(&url()).await.expect("PostgreSQL");
            claim_run(conn).await;
        })
        .await;
}

/// A new schema name for one test of this run, dropped when `cleanup` goes.
async fn fresh_schema(cleanup: &Cleanup) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    claim().await;
    let schema = format!(
        "{SCHEMA_PREFIX}{}_{}",
        run(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    cleanup.made(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    schema
}

/// A new database name for one test of this run (for the test to create), dropped when
/// `cleanup` goes.
async fn fresh_database(cleanup: &Cleanup) -> String {
    let database = fresh_schema(cleanup).await;
    cleanup.made(format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"));
    database
}

/// Drops the schemas and databases made for a test when it goes, whether the test
/// passed or panicked: every PostgreSQL test holds one from its start, and nothing makes
/// a schema or database without one (`fresh_schema(&cleanup)`).
#[must_use]
#[derive(Debug, Default)]
struct Cleanup(std::sync::Mutex<Vec<String>>);

fn cleanup() -> Cleanup {
    Cleanup::default()
}

impl Cleanup {
    /// Registers the statement that drops something made for the test.
    fn made(&self, drop: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(drop);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let made = std::mem::take(self.0.get_mut().unwrap_or_else(|e| e.into_inner()));
        if made.is_empty() {
            return;
        }
        // Inside the test's runtime: the drops go on a thread and runtime of their own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&url()).await?;
                for drop in made.into_iter().rev() {
                    sqlx::raw_sql(AssertSqlSafe(drop))
                        .execute(&mut conn)
                        .await?;
                }
                Ok::<_, sqlx::Error>(())
            })
        });
        if let Ok(Err(error)) = dropped.join() {
            eprintln!("could not drop a test's schemas: {error}");
        }
    }
}

/// Creates a new empty schema (dropped when `cleanup` goes) and returns options whose
/// `search_path` is it.
async fn fresh_options(cleanup: &Cleanup) -> PgConnectOptions {
    let schema = fresh_schema(cleanup).await;
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .expect("create schema");
    PostgresStore::options(&url())
        .expect("options")
        .options([("search_path", schema.as_str())])
}

/// A migrated store with its tables in a schema of its own (dropped when `cleanup` goes).
async fn fresh(cleanup: &Cleanup) -> PostgresStore {
    let store = PostgresStore::connect_lazy(&url())
        .expect("options")
        .in_schema(&fresh_schema(cleanup).await)
        .expect("schema name");
    store.migrate().await.expect("migrate");
    store
}

#[path = "../common/mod.rs"]
mod common;
use common::{api_works, cache_is_exact_across_writers, host_migrator};

/// A write from outside the store: the host's own SQL, on a connection of its own, to
/// the store's schema.
async fn host_writes(store: PostgresStore, write: OutsideWrite) {
    let schema = format!("{}.", store.schema().expect("a schema"));
    let mut host = PgConnection::connect(&url())
        .await
        .expect("the host's connection");
    if let Some(script) = common::backup_sql(&write, common::Db::Postgres) {
        for sql in script {
            let sql = sql.replace("{s}", &schema);
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut host)
                .await
                .expect("backup");
        }
        return;
    }
    let (sql, values) = common::outside_sql(write);
    let mut query = sqlx::query(AssertSqlSafe(sql.replace("{s}", &schema)));
    for value in values {
        query = match value {
            common::Value::Int(n) => query.bind(n),
            common::Value::Text(text) => query.bind(text),
        };
    }
    query.execute(&mut host).await.expect("the host's write");
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        #[cfg_attr(not(books_test_postgres), ignore = "BOOKS_TEST_POSTGRES_URL is not set")]
        setup: fresh,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
        guard: cleanup,
    }
}

/// The conformance suite again with no filter's ids kept: pages in id order start from
/// marks.
mod without_kept_ids {
    use super::*;
    async fn fresh_without_ids(cleanup: &Cleanup) -> PostgresStore {
        fresh(cleanup).await.with_kept_ids(0)
    }
    books_core::store_conformance_suite! {
        #[cfg_attr(not(books_test_postgres), ignore = "BOOKS_TEST_POSTGRES_URL is not set")]
        setup: fresh_without_ids,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
        guard: cleanup,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(cleanup: &Cleanup, config: Config) -> InProcess<PostgresStore> {
        InProcess::new(fresh(cleanup).await, config)
    }
    books_core::http_contract_suite! {
        #[cfg_attr(not(books_test_postgres), ignore = "BOOKS_TEST_POSTGRES_URL is not set")]
        make: in_process,
        outside_writes: host_writes,
        guard: cleanup,
    }
}

async fn get(api: &BooksApi, path: &str) -> u16 {
    let request = http::Request::get(path).body(String::new()).unwrap();
    api.handle(request).await.status().as_u16()
}

/// Two stores on one schema, as two API processes would have, the schema, and the
/// host's own pool.
async fn two_stores_and_a_host(
    cleanup: &Cleanup,
) -> (PostgresStore, PostgresStore, String, PgPool) {
    let ours = fresh(cleanup).await;
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
mod hooked;
mod host_store;
mod host_tables;
mod migrations;
mod pooler;
#[path = "../common/proxy.rs"]
mod proxy;
mod replicas;
use books_test_support::free_port;
use proxy::Proxy;
mod push_mode;
