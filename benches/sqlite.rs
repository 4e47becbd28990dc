//! The SQLite store through the API beside the same SQL run directly: through sqlx with
//! the same pool options and serialised by hand (the target), and through rusqlite (the
//! ceiling). Temp file, WAL, 45 books.
//!
//! `cargo bench --bench sqlite`; ratios are in BENCHMARKS.md.

use std::hint::black_box;
use std::sync::Mutex;

use books_core::store::{AuthorStore, BookInput, BookRecord, BookStore};
use books_core::{BooksApi, Config, ManualClock};
use books_sqlx::SqliteStore;
use books_sqlx::sqlx::{self, SqlitePool, sqlite::SqlitePoolOptions};
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};

mod common;
use common::*;

/// The store's single-book query, as static SQL (the store builds it with `concat!`).
const GET: &str = "SELECT b.id, b.title, b.year, b.author_id, a.name, b.created_at, b.updated_at \
                   FROM books b LEFT JOIN authors a ON a.id = b.author_id WHERE b.id = ?";

/// The store's page query: the join plus the total from the counter.
const PAGE: &str = "SELECT b.id, b.title, b.year, b.author_id, a.name, b.created_at, b.updated_at, \
                    (SELECT n FROM book_count) FROM books b LEFT JOIN authors a ON a.id = b.author_id \
                    ORDER BY b.id LIMIT ? OFFSET ?";

type PageRow = (
    i64,
    String,
    i32,
    Option<i64>,
    Option<String>,
    DateTime<Utc>,
    DateTime<Utc>,
    i64,
);

type Row = (
    i64,
    String,
    i32,
    Option<i64>,
    Option<String>,
    DateTime<Utc>,
    DateTime<Utc>,
);

fn record(row: Row) -> BookRecord {
    BookRecord {
        id: row.0,
        title: row.1,
        year: row.2,
        author_id: row.3,
        author_name: row.4,
        created_at: row.5,
        updated_at: row.6,
    }
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 15, 12, 0, 0).unwrap()
}

/// The handwritten sqlx path: same URL and options as the store, one pool.
async fn sqlx_list(pool: &SqlitePool) -> Response<Bytes> {
    let rows: Vec<PageRow> = sqlx::query_as(PAGE)
        .bind(20_i64)
        .bind(0_i64)
        .fetch_all(pool)
        .await
        .unwrap();
    let total = rows[0].7 as u64;
    let books: Vec<BookRecord> = rows
        .into_iter()
        .map(|r| record((r.0, r.1, r.2, r.3, r.4, r.5, r.6)))
        .collect();
    floor_list(&books, true, total)
}

async fn sqlx_get(pool: &SqlitePool, id: i64) -> Response<Bytes> {
    let row: Row = sqlx::query_as(GET).bind(id).fetch_one(pool).await.unwrap();
    floor_book(&record(row))
}

async fn sqlx_create(pool: &SqlitePool, writer: &SqlitePool, author: i64) -> Response<Bytes> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM authors WHERE id = ?)")
        .bind(author)
        .fetch_one(pool)
        .await
        .unwrap();
    assert!(exists);
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO books (title, author_id, year, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
    )
    .bind("Dune")
    .bind(author)
    .bind(2021)
    .bind(now())
    .bind(now())
    .fetch_one(writer)
    .await
    .unwrap();
    let row: Row = sqlx::query_as(GET).bind(id).fetch_one(pool).await.unwrap();
    floor_created(&record(row))
}

/// The ceiling: the same queries through rusqlite's cached statements.
fn rusqlite_list(conn: &rusqlite::Connection) -> Response<Bytes> {
    let mut statement = conn.prepare_cached(PAGE).unwrap();
    let mut total = 0;
    let books: Vec<BookRecord> = statement
        .query_map((20, 0), |r| {
            total = r.get::<_, i64>(7)?;
            Ok(BookRecord {
                id: r.get(0)?,
                title: r.get(1)?,
                year: r.get(2)?,
                author_id: r.get(3)?,
                author_name: r.get(4)?,
                created_at: r.get(5)?,
                updated_at: r.get(6)?,
            })
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    floor_list(&books, true, total as u64)
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("books-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.db");
    let url = format!("sqlite://{}", path.display());
    let (api, author, pool, writer) = runtime.block_on(async {
        let store = SqliteStore::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let author = store.add_author(Some("Frank Herbert")).await.unwrap();
        for n in 0..45 {
            let book = BookInput {
                title: format!("Dune, part {n}"),
                author_id: author,
                year: 2001 + n % 20,
            };
            store.create(&book, now()).await.unwrap();
        }
        let options = SqliteStore::options(&url).unwrap();
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .unwrap();
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .unwrap();
        let config = Config::default()
            .with_base_url(BASE)
            .with_clock(ManualClock::new(now()));
        (BooksApi::new(store, config), author, pool, writer)
    });
    let rusqlite = Mutex::new(rusqlite::Connection::open(&path).unwrap());
    rusqlite
        .lock()
        .unwrap()
        .pragma_update(None, "foreign_keys", "ON")
        .unwrap();
    let handle = |request: Request<String>| runtime.block_on(api.handle(request));
    let get = |path: &str| {
        Request::get(path)
            .header("x-request-id", REQUEST_ID)
            .body(String::new())
            .unwrap()
    };

    same(
        &handle(get("/api/books?include=author")),
        &runtime.block_on(sqlx_list(&pool)),
    );
    same(
        &handle(get("/api/books?include=author")),
        &rusqlite_list(&rusqlite.lock().unwrap()),
    );
    same(
        &handle(get("/api/books/7")),
        &runtime.block_on(sqlx_get(&pool, 7)),
    );

    let valid = format!("title=Dune&author_id={author}&year=2021");
    let post = || {
        Request::post("/api/books")
            .header("x-request-id", REQUEST_ID)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(valid.clone())
            .unwrap()
    };
    let mut group = c.benchmark_group("sqlite");
    group.bench_function("list_include", |b| {
        b.iter(|| handle(black_box(get("/api/books?include=author"))))
    });
    group.bench_function("list_include/sqlx", |b| {
        b.iter(|| runtime.block_on(sqlx_list(&pool)))
    });
    group.bench_function("list_include/rusqlite", |b| {
        b.iter(|| rusqlite_list(&rusqlite.lock().unwrap()))
    });
    group.bench_function("get_one", |b| {
        b.iter(|| handle(black_box(get("/api/books/7"))))
    });
    group.bench_function("get_one/sqlx", |b| {
        b.iter(|| runtime.block_on(sqlx_get(&pool, 7)))
    });
    group.bench_function("create", |b| b.iter(|| handle(black_box(post()))));
    group.bench_function("create/sqlx", |b| {
        b.iter(|| runtime.block_on(sqlx_create(&pool, &writer, author)))
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
