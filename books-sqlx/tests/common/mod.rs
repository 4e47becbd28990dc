//! What the host-database tests of both stores share.

use books_core::{AuthorStore, BookStore, BooksApi, Config};
use books_sqlx::sqlx::SqlSafeStr;
use books_sqlx::sqlx::migrate::{Migration, MigrationType, Migrator};

/// A host's own sqlx migrations: a table of its own, sqlx's default bookkeeping table.
pub fn host_migrator() -> Migrator {
    Migrator::with_migrations(vec![Migration::new(
        20250101000000,
        "host widgets".into(),
        MigrationType::Simple,
        "CREATE TABLE widgets (id INTEGER PRIMARY KEY, name TEXT)".into_sql_str(),
        false,
    )])
}

/// Creates a book through the API over `store` and finds it first in the list.
pub async fn api_works(store: impl BookStore + AuthorStore + Clone) {
    let author = store.add_author(Some("Host Author")).await.unwrap();
    let api = BooksApi::new(store, Config::default());
    let create = http::Request::post("/api/books")
        .body(format!("title=Hosted&author_id={author}&year=2020"))
        .unwrap();
    assert_eq!(api.handle(create).await.status(), 201);
    let list = http::Request::get("/api/books")
        .body(String::new())
        .unwrap();
    let body = api.handle(list).await.into_body();
    assert!(
        body.starts_with(br#"{"data":[{"id":1,"title":"Hosted""#),
        "{body:?}"
    );
}
