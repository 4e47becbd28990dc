//! The SQL stores through a failover, on real clusters: a pg_auto_failover formation
//! (a planned switchover, a killed primary), PostgreSQL and MariaDB replicas promoted
//! after the primary lost writes they never got (the history rewritten), and a Galera
//! cluster (reads on another node, a node killed). Each test needs its cluster's tools
//! and shows as ignored without them, except under `CI=true` (`gates.rs`).
//!
//! The load: writers creating books with an `Idempotency-Key` through the API (each 503
//! sent again with the same key until it is answered), readers listing and getting; the
//! checks: only 200, 201 and 503 (with `Retry-After`), every acknowledged book in the
//! database once, no key's book twice, and writes answered again after the event. The
//! tests run one at a time ([`one_at_a_time`]).

mod galera;
mod partition;
mod postgres;
mod rewrite;

use std::sync::Arc;

use books_core::BooksApi;
use books_core::store::{AuthorStore, BookStore};
pub use books_test_support::history::{Client, Load, Seen, nothing_lost_nothing_twice};
use http::Request;
use serde_json::Value;

/// Sends `method path body` (a form) through `api`: the status, `Retry-After`, the JSON.
async fn call(
    api: &BooksApi,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, bool, Value) {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = api.handle(request.body(body.to_owned()).unwrap()).await;
    let retry = response.headers().contains_key("retry-after");
    let json = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
    (response.status().as_u16(), retry, json)
}

/// Held for the whole of each test: the clusters and loads are heavy and their bounds
/// tight (seconds), so one runs at a time, on two cores, rather than starve another.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE.lock().await
}

/// The client of a load through `api`, in this process.
fn in_process(api: &BooksApi) -> Client {
    let api = api.clone();
    Arc::new(move |request| {
        let api = api.clone();
        Box::pin(async move {
            let response = api.handle(request).await;
            let retry = response.headers().contains_key("retry-after");
            let json = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
            Some((response.status().as_u16(), retry, json))
        })
    })
}

/// An author of the store's, and a book of hers (for the readers).
async fn seeded(store: &(impl AuthorStore + BookStore)) -> (i64, i64) {
    let author = store.add_author(Some("Failover")).await.expect("an author");
    let book = books_core::store::BookInput {
        title: "Before".into(),
        author_id: author,
        year: 2020,
    };
    let book = store
        .create(&book, chrono::Utc::now())
        .await
        .expect("a book");
    (author, book.id)
}
