//! Growth: bulk-loads 1,000 and then 1,000,000 books (100,000 authors) into SQLite,
//! PostgreSQL and MariaDB and times list page 1, the last page (50,000 at 1M), get one
//! and create through the API (cache off: every request reads) at each size.
//! `cargo run --release --example growth [-- sqlite|postgres|mysql]`
//! (PostgreSQL from BOOKS_LOAD_POSTGRES_URL, default the local `test` database; MariaDB
//! from BOOKS_LOAD_MYSQL_URL, default the local server as root).
//!
//! The bulk loader is plain SQL (a recursive CTE, generate_series, MariaDB's sequence
//! tables), one statement per table.

use std::time::{Duration, Instant};

use books_core::store::{BookStore, ListQuery};
use books_core::{BooksApi, Config};
use books_sqlx::sqlx::{self, Connection};
use books_sqlx::{MySqlStore, PostgresStore, SqliteStore};
use http::Request;

const AUTHORS: i64 = 100_000;

async fn time<F, Fut>(runs: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = u16>,
{
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let status = f().await;
        samples.push(started.elapsed());
        assert!(status < 300, "status {status}");
    }
    samples.sort();
    samples[runs / 2]
}

async fn measure(api: &BooksApi, books: i64) -> [Duration; 4] {
    let get = |path: String| async move {
        api.handle(Request::get(path).body(String::new()).unwrap())
            .await
            .status()
            .as_u16()
    };
    let list = time(200, || get("/api/books?include=author".into())).await;
    let deep = time(20, || {
        get(format!("/api/books?page={}&include=author", books / 20))
    })
    .await;
    let one = time(500, || {
        get(format!("/api/books/{}?include=author", books / 2 + 1))
    })
    .await;
    let create = time(200, || async {
        let request = Request::post("/api/books")
            .body("title=Grown&author_id=7&year=2020".to_owned())
            .unwrap();
        api.handle(request).await.status().as_u16()
    })
    .await;
    [list, deep, one, create]
}

fn row(db: &str, books: i64, d: [Duration; 4]) {
    let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
    println!(
        "| {db} | {books:>9} | {} | {} | {} | {} |",
        ms(d[0]),
        ms(d[1]),
        ms(d[2]),
        ms(d[3])
    );
}

async fn sqlite() {
    let dir = std::env::temp_dir().join(format!("books-growth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/growth.db", dir.display());
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect_with(&SqliteStore::options(&url).unwrap())
        .await
        .unwrap();
    sqlx::query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) INSERT INTO authors (name) SELECT 'Author ' || i FROM n")
        .bind(AUTHORS).execute(&mut conn).await.unwrap();
    let mut loaded = 0;
    for target in [1_000_i64, 1_000_000] {
        let started = Instant::now();
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?) \
             INSERT INTO books (title, author_id, year, created_at, updated_at) \
             SELECT 'Book ' || i, i % ? + 1, 2000 + i % 26, '2026-01-01 00:00:00+00:00', '2026-01-01 00:00:00+00:00' FROM n",
        )
        .bind(loaded + 1).bind(target).bind(AUTHORS).execute(&mut conn).await.unwrap();
        eprintln!("sqlite: loaded {target} books in {:?}", started.elapsed());
        loaded = target;
        let api = BooksApi::new(store.clone(), Config::default().with_cache(None));
        row(
            "SQLite",
            store.list(&ListQuery::new(0, 1)).await.unwrap().total as i64,
            measure(&api, target).await,
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

async fn postgres() {
    let url = std::env::var("BOOKS_LOAD_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("books_growth_{}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let options = PostgresStore::options(&url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let store = PostgresStore::connect_lazy_with(options);
    store.migrate().await.unwrap();
    // The bulk loads run on a connection of their own: the store's connections bound
    // every statement (`STATEMENT_TIMEOUT`), and loading 1M books takes longer.
    sqlx::query(sqlx::AssertSqlSafe(format!("SET search_path = {schema}")))
        .execute(&mut admin)
        .await
        .unwrap();
    sqlx::query("INSERT INTO authors (name) SELECT 'Author ' || i FROM generate_series(1, $1) i")
        .bind(AUTHORS)
        .execute(&mut admin)
        .await
        .unwrap();
    let mut loaded = 0;
    for target in [1_000_i64, 1_000_000] {
        let started = Instant::now();
        sqlx::query(
            "INSERT INTO books (title, author_id, year, created_at, updated_at) \
             SELECT 'Book ' || i, i % $3 + 1, 2000 + i % 26, now(), now() FROM generate_series($1, $2) i",
        )
        .bind(loaded + 1).bind(target).bind(AUTHORS).execute(&mut admin).await.unwrap();
        // What autovacuum does within a minute of a bulk load: statistics, and the
        // visibility map that lets a deep page skip ids without visiting the heap.
        sqlx::query("VACUUM ANALYZE")
            .execute(&mut admin)
            .await
            .unwrap();
        eprintln!("postgres: loaded {target} books in {:?}", started.elapsed());
        loaded = target;
        let api = BooksApi::new(store.clone(), Config::default().with_cache(None));
        row(
            "PostgreSQL",
            store.list(&ListQuery::new(0, 1)).await.unwrap().total as i64,
            measure(&api, target).await,
        );
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut admin)
        .await
        .unwrap();
}

async fn mariadb() {
    let url = std::env::var("BOOKS_LOAD_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
    let database = format!("books_growth_{}", std::process::id());
    let mut admin = sqlx::MySqlConnection::connect(&url).await.unwrap();
    let store = MySqlStore::connect_lazy(&url)
        .unwrap()
        .in_database(&database)
        .unwrap();
    store.migrate().await.unwrap();
    // The bulk loads run on a connection of their own: the store's connections bound
    // every statement (`STATEMENT_TIMEOUT`), and loading 1M books takes longer.
    let statement = |sql: String| sqlx::raw_sql(sqlx::AssertSqlSafe(sql));
    statement(format!("USE {database}"))
        .execute(&mut admin)
        .await
        .unwrap();
    statement(format!(
        "INSERT INTO authors (name) SELECT CONCAT('Author ', seq) FROM seq_1_to_{AUTHORS}"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    let mut loaded = 0;
    for target in [1_000_i64, 1_000_000] {
        let started = Instant::now();
        statement(format!(
            "INSERT INTO books (title, author_id, year, created_at, updated_at) \
             SELECT CONCAT('Book ', seq), seq % {AUTHORS} + 1, 2000 + seq % 26, NOW(6), NOW(6) \
             FROM seq_{}_to_{target}",
            loaded + 1
        ))
        .execute(&mut admin)
        .await
        .unwrap();
        statement("ANALYZE TABLE books, authors".into())
            .execute(&mut admin)
            .await
            .unwrap();
        eprintln!("mariadb: loaded {target} books in {:?}", started.elapsed());
        loaded = target;
        let api = BooksApi::new(store.clone(), Config::default().with_cache(None));
        row(
            "MariaDB",
            store.list(&ListQuery::new(0, 1)).await.unwrap().total as i64,
            measure(&api, target).await,
        );
    }
    statement(format!("DROP DATABASE {database}"))
        .execute(&mut admin)
        .await
        .unwrap();
}

#[tokio::main]
async fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    println!("| store | books | list page 1 ms | last page ms | get one ms | create ms |");
    println!("|---|---|---|---|---|---|");
    if ["all", "sqlite"].contains(&which.as_str()) {
        sqlite().await;
    }
    if ["all", "postgres"].contains(&which.as_str()) {
        postgres().await;
    }
    if ["all", "mysql"].contains(&which.as_str()) {
        mariadb().await;
    }
}
