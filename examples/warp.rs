//! The books API mounted beside a host's own warp route: `cargo run --example warp`, then
//! `curl localhost:3030/api/books` and `curl localhost:3030/hello/you`.
//! (`warp::serve` keeps this short; the server, `src/main.rs`, adds timeouts, shedding and graceful shutdown.)

use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use warp::Filter;

#[tokio::main]
async fn main() -> Result<(), books_core::StoreError> {
    let store = MemStore::new();
    books_core::demo::load_if_empty(&store, chrono::Utc::now()).await?; // 50 authors, 45 books
    let api = BooksApi::new(
        store,
        Config::default().with_base_url("http://127.0.0.1:3030"),
    );
    let hello = warp::path!("hello" / String).map(|name| format!("Hello, {name}!"));
    let app = books_warp::routes(api).or(hello);
    println!("try http://127.0.0.1:3030/api/books and http://127.0.0.1:3030/hello/you");
    warp::serve(app).run(([127, 0, 0, 1], 3030)).await;
    Ok(())
}
