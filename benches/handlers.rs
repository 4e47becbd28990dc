//! Handler cost through `BooksApi::handle` (memory store), each beside its floor: a
//! handwritten function that builds the identical `http::Response` (status, headers,
//! body bytes) from prepared values with serde_json.
//!
//! `cargo bench --bench handlers`; ratios are in BENCHMARKS.md.

use std::hint::black_box;

use books_core::store::{AuthorStore, BookInput, BookRecord, BookStore, ListQuery};
use books_core::{BooksApi, Config, ManualClock};
use books_memstore::MemStore;
use chrono::{DateTime, TimeZone, Utc};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures_util::FutureExt;
use http::Request;

mod common;
use common::*;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 15, 12, 0, 0).unwrap()
}

struct Fixture {
    api: BooksApi,
    author: i64,
    page: Vec<BookRecord>,
    one: BookRecord,
}

async fn fixture() -> Fixture {
    let store = MemStore::new();
    let author = store.add_author(Some("Frank Herbert")).await.unwrap();
    for n in 0..45 {
        let book = BookInput {
            title: format!("Dune, part {n}"),
            author_id: author,
            year: 2001 + n % 20,
        };
        store.create(&book, now()).await.unwrap();
    }
    let page = store.list(&ListQuery::new(0, 20)).await.unwrap().books;
    let one = store.get(7).await.unwrap().unwrap();
    let config = Config::default()
        .with_base_url(BASE)
        .with_clock(ManualClock::new(now()));
    Fixture {
        api: BooksApi::new(store, config),
        author,
        page,
        one,
    }
}

fn get(path: &str, accept: Option<&str>) -> Request<String> {
    let mut request = Request::get(path).header("x-request-id", REQUEST_ID);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    request.body(String::new()).unwrap()
}

fn post(body: String) -> Request<String> {
    Request::post("/api/books")
        .header("x-request-id", REQUEST_ID)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .unwrap()
}

// ---------------------------------------------------------------- benches

fn handlers(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let fx = runtime.block_on(fixture());
    let api = &fx.api;
    // The memory store never waits: poll once instead of paying for a runtime.
    let handle = |request: Request<String>| {
        api.handle(request)
            .now_or_never()
            .expect("memory store futures are ready")
    };
    let valid = format!("title=Dune&author_id={}&year=2021", fx.author);
    let invalid = format!("title=&author_id={}&year=1999", fx.author);

    // Identical bytes, checked once before measuring.
    same(&handle(get("/api/ping", None)), &floor_ping());
    same(&handle(get("/api/books/7", None)), &floor_book(&fx.one));
    same(
        &handle(get("/api/books", None)),
        &floor_list(&fx.page, false, 45),
    );
    same(
        &handle(get("/api/books?include=author", None)),
        &floor_list(&fx.page, true, 45),
    );
    same(&handle(post(invalid.clone())), &floor_invalid());
    let created = handle(post(valid.clone()));
    let id = serde_json::from_slice::<serde_json::Value>(created.body()).unwrap()["id"]
        .as_i64()
        .unwrap();
    let record = runtime.block_on(async { api_get(&fx, id).await });
    same(&created, &floor_created(&record));

    let mut group = c.benchmark_group("handlers");
    group.bench_function("ping", |b| {
        b.iter_batched(|| get("/api/ping", None), handle, BatchSize::SmallInput)
    });
    group.bench_function("ping/floor", |b| b.iter(floor_ping));
    group.bench_function("get_one", |b| {
        b.iter_batched(|| get("/api/books/7", None), handle, BatchSize::SmallInput)
    });
    group.bench_function("get_one/floor", |b| {
        b.iter(|| floor_book(black_box(&fx.one)))
    });
    group.bench_function("list", |b| {
        b.iter_batched(|| get("/api/books", None), handle, BatchSize::SmallInput)
    });
    group.bench_function("list/floor", |b| {
        b.iter(|| floor_list(black_box(&fx.page), false, 45))
    });
    group.bench_function("list_include", |b| {
        b.iter_batched(
            || get("/api/books?include=author", None),
            handle,
            BatchSize::SmallInput,
        )
    });
    group.bench_function("list_include/floor", |b| {
        b.iter(|| floor_list(black_box(&fx.page), true, 45))
    });
    group.bench_function("list_xml", |b| {
        b.iter_batched(
            || get("/api/books", Some("application/xml")),
            handle,
            BatchSize::SmallInput,
        )
    });
    group.bench_function("create_valid", |b| {
        b.iter_batched(|| post(valid.clone()), handle, BatchSize::SmallInput)
    });
    group.bench_function("create_valid/floor", |b| {
        b.iter(|| floor_created(black_box(&record)))
    });
    group.bench_function("create_invalid", |b| {
        b.iter_batched(|| post(invalid.clone()), handle, BatchSize::SmallInput)
    });
    group.bench_function("create_invalid/floor", |b| b.iter(floor_invalid));
    // What a host's test pays per API: a memory store with the demo data, and the API.
    group.bench_function("new_api_with_demo_data", |b| {
        b.iter(|| {
            let store = MemStore::new();
            books_core::demo::load_if_empty(&store, now())
                .now_or_never()
                .expect("a memory store never waits")
                .unwrap();
            black_box(BooksApi::new(store, Config::default()))
        })
    });
    group.finish();
}

async fn api_get(fx: &Fixture, id: i64) -> BookRecord {
    let request = get(&format!("/api/books/{id}"), None);
    let response = fx.api.handle(request).await;
    let value: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
    BookRecord {
        id,
        title: value["title"].as_str().unwrap().to_owned(),
        year: value["year"].as_i64().unwrap() as i32,
        author_id: Some(fx.author),
        author_name: None,
        created_at: now(),
        updated_at: now(),
    }
}

criterion_group!(benches, handlers);
criterion_main!(benches);
