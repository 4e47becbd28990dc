//! Migration waits: how long a create waits while the store migrates a database of 1M
//! books from an earlier release's schema, with writers creating books throughout.
//! `cargo run --release --example migration_waits [-- FROM [BOOKS]]` (PostgreSQL from
//! BOOKS_LOAD_POSTGRES_URL, default the local `test` database's server).
//!
//! A fresh database is migrated to version FROM (default 1: the schema before 0002 and
//! 0003), filled with BOOKS books (default 1,000,000), then 8 writers create books
//! through the store while it migrates, twice: as the store runs migrations (0003's
//! indexes built online), then as sqlx's migrator runs them (each in one transaction, as
//! a host's own tooling would). Printed per run: the migrations' time (and each one's),
//! and the creates that overlapped them: how many, the median, p99 and longest wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use books_core::store::{BookInput, BookStore};
use books_sqlx::PostgresStore;
use books_sqlx::sqlx::{self, AssertSqlSafe, Connection, PgConnection};

const WRITERS: usize = 8;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let from: i64 = args
        .next()
        .map_or(1, |a| a.parse().expect("FROM: a version"));
    let books: i64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("BOOKS: a count"));
    let server = std::env::var("BOOKS_LOAD_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    for (run, online) in [
        ("the store (online)", true),
        ("sqlx's migrator (in transactions)", false),
    ] {
        let url = fresh_database(&server, from, books).await;
        let store = PostgresStore::connect_lazy(&url).expect("a URL");
        let (waits, window, migrations) = writes_during(&store, from, async {
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
        let (began, took) = window;
        let during: Vec<Duration> = waits
            .iter()
            .filter(|(at, wait)| *at + *wait > began && *at < began + took)
            .map(|(_, wait)| *wait)
            .collect();
        let each: Vec<String> = migrations
            .iter()
            .map(|(version, took)| format!("{version}: {took:.2?}"))
            .collect();
        println!(
            "{run}, from version {from} at {books} books: {took:.2?} ({}); {} creates \
             overlapped it: {}",
            each.join(", "),
            during.len(),
            summary(during)
        );
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

/// Each create's start and wait while `migrate` runs (and a second before and after),
/// when the migrations began and how long they took, and the version and time of each
/// one after `from`, as recorded.
async fn writes_during(
    store: &PostgresStore,
    from: i64,
    migrate: impl Future<Output = ()>,
) -> (
    Vec<(Instant, Duration)>,
    (Instant, Duration),
    Vec<(i64, Duration)>,
) {
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
    let recorded: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT version, execution_time FROM _books_migrations WHERE version > $1 ORDER BY version",
    )
    .bind(from)
    .fetch_all(store.pool())
    .await
    .unwrap();
    let migrations = recorded
        .into_iter()
        .map(|(version, nanos)| (version, Duration::from_nanos(nanos as u64)))
        .collect();
    (waits, (began, took), migrations)
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
