//! Migration waits: how long a create waits while the store migrates a database of 1M
//! books from an earlier release's schema, with writers creating books throughout.
//! `cargo run --release --example migration_waits [-- FROM [BOOKS]]` (PostgreSQL from
//! BOOKS_LOAD_POSTGRES_URL, default the local `test` database's server), or `-- mysql
//! [FROM [BOOKS]]` (MariaDB from BOOKS_LOAD_MYSQL_URL, default the local server).
//!
//! A fresh database is migrated to version FROM (default 1: the schema before 0002 and
//! 0003), filled with BOOKS books (default 1,000,000), then 8 writers create books
//! through the store while it migrates. On PostgreSQL twice: as the store runs
//! migrations (0003's indexes built online), then as sqlx's migrator runs them (each in
//! one transaction, as a host's own tooling would); on MariaDB, whose DDL is not
//! transactional, as the store runs them. Printed per run: the migrations' time (and
//! each one's), and the creates that overlapped them: how many, the median, p99 and
//! longest wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use books_core::store::{BookInput, BookStore};
use books_sqlx::sqlx::{self, AssertSqlSafe, Connection, MySqlConnection, PgConnection};
use books_sqlx::{MySqlStore, PostgresStore};

const WRITERS: usize = 8;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let mysql = args.next_if(|a| a == "mysql").is_some();
    let from: i64 = args
        .next()
        .map_or(1, |a| a.parse().expect("FROM: a version"));
    let books: i64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("BOOKS: a count"));
    if mysql {
        return mysql_run(from, books).await;
    }
    let server = std::env::var("BOOKS_LOAD_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    for (run, online) in [
        ("the store (online)", true),
        ("sqlx's migrator (in transactions)", false),
    ] {
        let url = fresh_database(&server, from, books).await;
        let store = PostgresStore::connect_lazy(&url).expect("a URL");
        let (waits, window) = writes_during(&store, async {
            if online {
                store.migrate().await.expect("migrated");
            } else {
                PostgresStore::migrator()
                    .run(store.pool())
                    .await
                    .expect("migrated");
            }
        })
        .await;
        let recorded: Vec<(i64, i64)> = sqlx::query_as(RECORDED)
            .bind(from)
            .fetch_all(store.pool())
            .await
            .unwrap();
        report(run, from, books, &waits, window, &recorded);
        store.close().await;
        drop_database(&server, &url).await;
    }
}

/// A new database at version `from` of the store's migrations with `books` books.
async fn fresh_database(server: &str, from: i64, books: i64) -> String {
    let name = format!("books_migration_waits_{}", std::process::id());
    let mut admin = PgConnection::connect(server).await.expect("the server");
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&mut admin)
            .await
            .unwrap();
    }
    let url = format!("{}/{name}", server.rsplit_once('/').expect("…/database").0);
    let mut conn = PgConnection::connect(&url).await.unwrap();
    PostgresStore::migrator()
        .run_to(from, &mut conn)
        .await
        .unwrap();
    let fill = format!(
        "INSERT INTO authors (name) SELECT 'Author ' || n FROM generate_series(1, 1000) n; \
         INSERT INTO books (title, author_id, year, created_at, updated_at) \
         SELECT 'Book ' || n, 1 + n % 1000, 1900 + n % 120, now(), now() \
         FROM generate_series(1, {books}) n"
    );
    sqlx::raw_sql(AssertSqlSafe(fill))
        .execute(&mut conn)
        .await
        .unwrap();
    let vacuum = sqlx::raw_sql("VACUUM ANALYZE books")
        .execute(&mut conn)
        .await;
    vacuum.unwrap();
    url
}

async fn drop_database(server: &str, url: &str) {
    let name = url.rsplit_once('/').unwrap().1;
    let mut admin = PgConnection::connect(server).await.unwrap();
    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::raw_sql(AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .unwrap();
}

/// The same on MariaDB: a fresh database at `from` with `books` books, migrated by the
/// store under the writers.
async fn mysql_run(from: i64, books: i64) {
    let server = std::env::var("BOOKS_LOAD_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
    let name = format!("books_migration_waits_{}", std::process::id());
    let url = format!("{}/{name}", server.rsplit_once('/').expect("…/database").0);
    let mut admin = MySqlConnection::connect(&server).await.expect("the server");
    let create = format!("DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}");
    sqlx::raw_sql(AssertSqlSafe(create))
        .execute(&mut admin)
        .await
        .unwrap();
    let mut conn = MySqlConnection::connect(&url).await.unwrap();
    MySqlStore::migrator()
        .run_to(from, &mut conn)
        .await
        .unwrap();
    let fill = format!(
        "INSERT INTO authors (name) SELECT CONCAT('Author ', seq) FROM seq_1_to_1000; \
         INSERT INTO books (title, author_id, year, created_at, updated_at) \
         SELECT CONCAT('Book ', seq), 1 + seq % 1000, 1900 + seq % 120, NOW(6), NOW(6) \
         FROM seq_1_to_{books}; ANALYZE TABLE books"
    );
    sqlx::raw_sql(AssertSqlSafe(fill))
        .execute(&mut conn)
        .await
        .unwrap();
    let store = MySqlStore::connect_lazy(&url).expect("a URL");
    let (waits, window) = writes_during(&store, async {
        store.migrate().await.expect("migrated");
    })
    .await;
    let recorded: Vec<(i64, i64)> = sqlx::query_as(AssertSqlSafe(RECORDED.replace("$1", "?")))
        .bind(from)
        .fetch_all(store.pool())
        .await
        .unwrap();
    report("the store", from, books, &waits, window, &recorded);
    store.close().await;
    let drop = format!("DROP DATABASE IF EXISTS {name}");
    sqlx::raw_sql(AssertSqlSafe(drop))
        .execute(&mut admin)
        .await
        .unwrap();
}

/// The migrations applied after `$1`, and the nanoseconds each took, as recorded.
const RECORDED: &str = "SELECT version, execution_time FROM _books_migrations \
                        WHERE version > $1 ORDER BY version";

/// Prints one run: the migrations' time (each one's as `recorded`) and the creates that
/// overlapped `window`.
fn report(
    run: &str,
    from: i64,
    books: i64,
    waits: &[(Instant, Duration)],
    (began, took): (Instant, Duration),
    recorded: &[(i64, i64)],
) {
    let during: Vec<Duration> = waits
        .iter()
        .filter(|(at, wait)| *at + *wait > began && *at < began + took)
        .map(|(_, wait)| *wait)
        .collect();
    let each: Vec<String> = recorded
        .iter()
        .map(|(version, nanos)| format!("{version}: {:.2?}", Duration::from_nanos(*nanos as u64)))
        .collect();
    println!(
        "{run}, from version {from} at {books} books: {took:.2?} ({}); {} creates \
         overlapped it: {}",
        each.join(", "),
        during.len(),
        summary(during)
    );
}

/// Each create's start and wait while `migrate` runs (and a second before and after),
/// and when the migrations began and how long they took.
async fn writes_during<S: BookStore + Clone>(
    store: &S,
    migrate: impl Future<Output = ()>,
) -> (Vec<(Instant, Duration)>, (Instant, Duration)) {
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut waits = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let book = BookInput {
                        title: format!("During {writer}"),
                        author_id: 1,
                        year: 2024,
                    };
                    let started = Instant::now();
                    let created = store.create(&book, chrono::Utc::now()).await;
                    waits.push((started, started.elapsed()));
                    if created.is_err() {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                waits
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let began = Instant::now();
    migrate.await;
    let took = began.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let mut waits = Vec::new();
    for writer in writers {
        waits.extend(writer.await.unwrap());
    }
    (waits, (began, took))
}

/// The median, p99 and longest of `waits`.
fn summary(mut waits: Vec<Duration>) -> String {
    if waits.is_empty() {
        return "none".into();
    }
    waits.sort();
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize];
    format!(
        "median {:.1?}, p99 {:.1?}, longest {:.1?}",
        at(0.5),
        at(0.99),
        waits[waits.len() - 1]
    )
}
