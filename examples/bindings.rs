//! The same API through each binding, for `scripts/load.py --bindings`: every binding is
//! served by the same hyper connection loop (the baselines' socket settings), over a
//! memory store with the demo data, so only the binding's own cost differs. Not an
//! example to copy: see `warp.rs` and `axum.rs` for that.
//!
//! `bindings <warp|tower|axum> <listen>`

use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, listen] = args.as_slice() else {
        return Err("usage: bindings <warp|tower|axum> <listen>".into());
    };
    let store = MemStore::new();
    books_core::demo::load_if_empty(&store, chrono::Utc::now()).await?;
    let api = BooksApi::new(store, Config::default());
    let listener = TcpListener::bind(listen).await?;
    println!(
        "bindings {kind} listening on http://{}",
        listener.local_addr()?
    );
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(10))
        .max_buf_size(16 * 1024);
    let warp = TowerToHyperService::new(warp::service(books_warp::routes(api.clone())));
    let axum = TowerToHyperService::new(axum::Router::new().nest_service("/api", api.nested()));
    let tower = TowerToHyperService::new(api);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        match kind.as_str() {
            "warp" => tokio::spawn(builder.serve_connection(io, warp.clone())),
            "axum" => tokio::spawn(builder.serve_connection(io, axum.clone())),
            _ => tokio::spawn(builder.serve_connection(io, tower.clone())),
        };
    }
}
