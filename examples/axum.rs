//! The books API inside an axum application, beside the host's own routes and state:
//! `cargo run --example axum`, then `curl localhost:3000/api/books` and
//! `curl localhost:3000/hello`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use books_core::{BooksApi, Config};
use books_memstore::MemStore;

/// The host's own state, shared by its own handlers.
#[derive(Clone, Default)]
struct AppState {
    visits: Arc<AtomicU64>,
}

async fn hello(State(state): State<AppState>) -> String {
    let visit = state.visits.fetch_add(1, Ordering::Relaxed) + 1;
    format!("Hello, visitor {visit}!")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = MemStore::new();
    books_core::demo::load_if_empty(&store, chrono::Utc::now()).await?; // 50 authors, 45 books
    let api = BooksApi::new(
        store,
        Config::default().with_base_url("http://127.0.0.1:3000"),
    );
    // `api.nested()` is a tower Service for routers that strip the mount path: nested at
    // its prefix, it reads what axum leaves as relative to that prefix. `BooksApi` itself
    // (with `route_service`, `fallback_service`) and `.layer(api.layer())` work too (see
    // the README's "Embedding").
    let app = Router::new()
        .route("/hello", get(hello))
        .nest_service(api.config().prefix(), api.nested())
        .with_state(AppState::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("try http://127.0.0.1:3000/api/books and http://127.0.0.1:3000/hello");
    axum::serve(listener, app).await?;
    Ok(())
}
