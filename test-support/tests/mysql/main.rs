//! The MariaDB store against the shared suites, in a fresh database per test, and what
//! only MariaDB has: one module per topic.
//!
//! The server comes from `BOOKS_TEST_MYSQL_URL` (for example
//! `mysql://root@127.0.0.1:3306/test`; the user may create databases). Without it every
//! case shows as ignored (`build.rs`), except under `CI=true`, where it runs and fails.
//! The replica tests start servers of their own (`books-test-support`). Each test drops
//! the databases it made when it ends ([`cleanup`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use books_core::Config;
use books_core::store::{BookStore, StoreError};
use books_core::testing::InProcess;
use books_core::testing::store_cases::OutsideWrite;
use books_sqlx::MySqlStore;
use books_sqlx::sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool};
use books_sqlx::sqlx::{self, AssertSqlSafe, ConnectOptions, Connection};
use tokio::sync::OnceCell;

const URL_VAR: &str = "BOOKS_TEST_MYSQL_URL";

/// The test server's URL (the cases run only when it is given, or under `CI=true`).
fn url() -> String {
    std::env::var(URL_VAR)
        .unwrap_or_else(|_| panic!("{URL_VAR} is not set: CI=true runs the MariaDB tests"))
}

/// The test server's options, in `database`.
fn options_in(database: &str) -> MySqlConnectOptions {
    MySqlStore::options(&url())
        .expect("options")
        .database(database)
}

const DATABASE_PREFIX: &str = "books_test_";

/// This run's number: its databases are `books_test_<run>_<n>`.
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

/// The name of a run's lock, held for as long as the run's process lives.
fn lock_of(run: u32) -> String {
    format!("{DATABASE_PREFIX}{run}")
}

/// Holds a lock named by this run for as long as the process lives (the connection is
/// kept, never closed), then drops the databases of every run whose lock is free: runs
/// that ended. A run going on in parallel keeps its databases.
async fn claim() {
    static CLAIMED: OnceCell<()> = OnceCell::const_new();
    CLAIMED
        .get_or_init(|| async {
            let mut conn = MySqlConnection::connect(&url()).await.expect("MariaDB");
            sqlx::query("SELECT GET_LOCK(?, 0)")
                .bind(lock_of(run()))
                .execute(&mut conn)
                .await
                .expect("lock this run");
            let databases: Vec<String> = sqlx::query_scalar(
                "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
                 WHERE schema_name LIKE 'books\\_test\\_%'",
            )
            .fetch_all(&mut conn)
            .await
            .expect("list databases");
            for database in databases {
                let Some(owner) = database
                    .strip_prefix(DATABASE_PREFIX)
                    .and_then(|rest| rest.split('_').next())
                    .and_then(|run| run.parse::<u32>().ok())
                else {
                    continue;
                };
                let free: Option<i64> = sqlx::query_scalar("SELECT IS_FREE_LOCK(?)")
                    .bind(lock_of(owner))
                    .fetch_one(&mut conn)
                    .await
                    .expect("probe a run's lock");
                if free == Some(1) {
                    sqlx::raw_sql(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {database}")))
                        .execute(&mut conn)
                        .await
                        .expect("drop an ended run's database");
                }
            }
            // Kept open to the end of the process: the lock says this run is alive.
            std::mem::forget(conn);
        })
        .await;
}

/// A new, empty database for one test of this run, dropped when `cleanup` goes.
async fn fresh_database(cleanup: &Cleanup) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    claim().await;
    let database = format!(
        "{DATABASE_PREFIX}{}_{}",
        run(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    cleanup.made(database.clone());
    let mut conn = MySqlConnection::connect(&url()).await.expect("connect");
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    database
}

/// Drops the databases made for a test when it goes, whether the test passed or
/// panicked: every MariaDB test holds one from its start, and nothing makes a database
/// without one (`fresh_database(&cleanup)`).
#[must_use]
#[derive(Debug, Default)]
struct Cleanup(std::sync::Mutex<Vec<String>>);

fn cleanup() -> Cleanup {
    Cleanup::default()
}

impl Cleanup {
    /// Registers a database made for the test.
    fn made(&self, database: String) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(database);
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
                let mut conn = MySqlConnection::connect(&url()).await?;
                for database in made {
                    sqlx::raw_sql(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {database}")))
                        .execute(&mut conn)
                        .await?;
                }
                Ok::<_, sqlx::Error>(())
            })
        });
        if let Ok(Err(error)) = dropped.join() {
            eprintln!("could not drop a test's databases: {error}");
        }
    }
}

/// A migrated store in a database of its own (dropped when `cleanup` goes).
async fn fresh(cleanup: &Cleanup) -> MySqlStore {
    let store = MySqlStore::connect_lazy_with(options_in(&fresh_database(cleanup).await));
    store.migrate().await.expect("migrate");
    store
}

/// The database a store's pool connects to.
fn database_of(store: &MySqlStore) -> String {
    store
        .pool()
        .connect_options()
        .get_database()
        .expect("a database")
        .to_owned()
}

#[path = "../common/mod.rs"]
mod common;
use common::{api_works, cache_is_exact_across_writers, host_migrator};

/// `sql` (with `{s}` for the tables' schema and `$N` placeholders, as the shared tests
/// write it) as MariaDB takes it: no schema (the connection's database), and each `$N`
/// a `?` binding `values[N - 1]` where it stands.
fn host_query<'a>(
    sql: &str,
    values: &'a [common::Value],
) -> sqlx::query::Query<'a, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    let mut text = String::new();
    let mut order = Vec::new();
    let mut rest = sql.replace("{s}", "");
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - at - 1);
        order.push(rest[at + 1..at + 1 + digits].parse::<usize>().unwrap() - 1);
        text.push('?');
        rest = rest[at + 1 + digits..].to_owned();
    }
    text.push_str(&rest);
    let mut query = sqlx::query(AssertSqlSafe(text));
    for at in order {
        query = match &values[at] {
            common::Value::Int(n) => query.bind(*n),
            common::Value::Text(text) => query.bind(text.as_str()),
        };
    }
    query
}

/// A write from outside the store: the host's own SQL, on a connection of its own, to
/// the store's database.
async fn host_writes(store: MySqlStore, write: OutsideWrite) {
    let mut host = options_in(&database_of(&store))
        .connect()
        .await
        .expect("the host's connection");
    if let Some(script) = common::backup_sql(&write, common::Db::MySql) {
        for sql in script {
            let sql = sql.replace("{s}", "");
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut host)
                .await
                .expect("backup");
        }
        return;
    }
    let (sql, values) = common::outside_sql(write);
    host_query(sql, &values)
        .execute(&mut host)
        .await
        .expect("the host's write");
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        #[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
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
    async fn fresh_without_ids(cleanup: &Cleanup) -> MySqlStore {
        fresh(cleanup).await.with_kept_ids(0)
    }
    books_core::store_conformance_suite! {
        #[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
        setup: fresh_without_ids,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
        guard: cleanup,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(cleanup: &Cleanup, config: Config) -> InProcess<MySqlStore> {
        InProcess::new(fresh(cleanup).await, config)
    }
    books_core::http_contract_suite! {
        #[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
        make: in_process,
        outside_writes: host_writes,
        guard: cleanup,
    }
}

/// Two stores on one database, as two API processes would have, and the host's own
/// pool on it.
async fn two_stores_and_a_host(cleanup: &Cleanup) -> (MySqlStore, MySqlStore, MySqlPool) {
    let ours = fresh(cleanup).await;
    let options = options_in(&database_of(&ours));
    let theirs = MySqlStore::connect_lazy_with(options.clone());
    // Room for the shared tests' recursive bulk loads (MariaDB stops at 1,000 rows).
    let host = sqlx::mysql::MySqlPoolOptions::new()
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::raw_sql("SET SESSION max_recursive_iterations = 1000000")
                    .execute(conn)
                    .await
                    .map(drop)
            })
        })
        .connect_with(options)
        .await
        .unwrap();
    (ours, theirs, host)
}

/// Runs a host's statement (as the shared tests write it) with `author` for each `$1`.
async fn host_sql(host: &MySqlPool, sql: &str, author: i64) {
    let values = [common::Value::Int(author)];
    host_query(sql, &values).execute(host).await.unwrap();
}

/// Whether `error` is the store's "unavailable" (503).
fn unavailable<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Unavailable(_)))
}

mod exactness;
mod faults;
mod host_store;
mod migrations;
#[path = "../common/proxy.rs"]
mod proxy;
mod replicas;
mod schema;
use books_test_support::free_port;
use proxy::Proxy;
