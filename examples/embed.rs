//! The books API mounted beside a host's own warp route: `cargo run --example embed`.
//! (`warp::serve` keeps this short; the `server` example adds timeouts and graceful shutdown.)

use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use warp::Filter;

#[tokio::main]
async fn main() {
    let api = BooksApi::new(
        MemStore::new(),
        Config::default().with_base_url("http://127.0.0.1:3030"),
    );
    let hello = warp::path!("hello" / String).map(|name| format!("Hello, {name}!"));
    let app = books_warp::routes(api).or(hello);
    println!("try http://127.0.0.1:3030/api/ping and http://127.0.0.1:3030/hello/you");
    warp::serve(app).run(([127, 0, 0, 1], 3030)).await;
}
