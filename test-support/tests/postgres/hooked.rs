//! A generic wrapper over the PostgreSQL store ([`Hooked`]) keeps every tier the store
//! names, and each tier's calls go through its hook.

use books_core::store::{Hooked, StoreCall};
use books_core::testing::{CountingHook, Harness, InProcess};

use super::*;

#[tokio::test]
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
async fn a_hooked_store_keeps_the_stores_tiers_and_hooks_each() {
    let cleanup = cleanup();
    let bare = BooksApi::new(fresh(&cleanup).await, Config::default()).tiers();
    // Every tier the store and the wrapper implement is named: the start-up check passes.
    let wrapped = Hooked::new(fresh(&cleanup).await, CountingHook::default());
    assert_eq!(books_core::implemented_tiers!(&wrapped), bare);
    books_core::checked_api!(wrapped, Config::default()).expect("every tier named");
    let hooked = InProcess::new(
        Hooked::new(fresh(&cleanup).await, CountingHook::default()),
        Config::default(),
    );
    assert_eq!(hooked.api().tiers(), bare);
    assert_eq!(bare, books_core::store::Tiers::ALL);
    let author = hooked.add_author(Some("Ann")).await;
    let book = format!(r#"{{"title":"Dune","author_id":{author},"year":2021}}"#);
    let send = |method: &str, path: &str, headers: &[(&str, &str)]| {
        let mut request = http::Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request = request.header("content-type", "application/json");
        hooked.send(request.body(bytes::Bytes::from(book.clone())).unwrap())
    };
    let created = send("POST", "/api/books", &[("idempotency-key", "k1")]).await;
    assert_eq!(created.status(), 201);
    assert_eq!(send("GET", "/api/books", &[]).await.status(), 200);
    let read = send("GET", "/api/books/1", &[]).await;
    let etag = read.headers()["etag"].to_str().unwrap().to_owned();
    let updated = send("PUT", "/api/books/1", &[("if-match", &etag)]).await;
    assert_eq!(updated.status(), 200);
    let hook = hooked.store().hook();
    for call in [
        StoreCall::CreateKeyed,
        StoreCall::UpdateIf,
        StoreCall::ListVersioned,
    ] {
        assert!(hook.count(call) >= 1, "{} was not hooked", call.name());
    }
}
