//! Every writer is seen: another store (another process), the host's own SQL, deep
//! pages after a host's bulk load.

use super::*;

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_see_every_writer() {
    let cleanup = cleanup();
    let (ours, theirs, schema, host) = two_stores_and_a_host(&cleanup).await;
    cache_is_exact_across_writers(ours, theirs, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_pages_see_every_writer() {
    let cleanup = cleanup();
    let (ours, theirs, schema, host) = two_stores_and_a_host(&cleanup).await;
    common::kept_pages_stay_exact_across_writers(
        ours,
        theirs,
        "OVERRIDING SYSTEM VALUE",
        async |sql, author| host_sql(&host, &schema, sql, author).await,
    )
    .await;
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_pages_cross_groups() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    common::deep_pages_cross_groups(ours, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_creates_count_as_every_other_insert() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    common::batched_creates_count_as_every_other_insert(ours, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

/// A host's `TRUNCATE` (which fires no row trigger) resets the total and moves the
/// version: cached pages and books are not served again, and new books count from zero.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_keeps_counts_and_cache_exact() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    let author = books_core::store::AuthorStore::add_author(&ours, Some("A"))
        .await
        .unwrap();
    let api = BooksApi::new(ours.clone(), Config::default());
    let call = async |method: &str, path: &str, body: String| {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .body(body)
            .unwrap();
        let response = api.handle(request).await;
        let json: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        (response.status().as_u16(), json)
    };
    let create = format!("title=T&author_id={author}&year=2020");
    for _ in 0..3 {
        assert_eq!(call("POST", "/api/books", create.clone()).await.0, 201);
    }
    for _ in 0..2 {
        let (_, page) = call("GET", "/api/books?include=author", String::new()).await;
        assert_eq!(page["meta"]["total"], 3);
        assert_eq!(call("GET", "/api/books/1", String::new()).await.0, 200);
    }
    let version = ours.version().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("TRUNCATE {schema}.books")))
        .execute(&host)
        .await
        .unwrap();
    assert_ne!(ours.version().await.unwrap(), version, "the version moved");
    let (_, page) = call("GET", "/api/books?include=author", String::new()).await;
    assert_eq!(page["meta"]["total"], 0, "{page}");
    assert_eq!(page["data"], serde_json::json!([]));
    assert_eq!(call("GET", "/api/books/1", String::new()).await.0, 404);
    assert_eq!(call("POST", "/api/books", create.clone()).await.0, 201);
    assert_eq!(
        ours.list(&books_core::store::ListQuery::new(0, 20))
            .await
            .unwrap()
            .total,
        1,
        "counts from zero"
    );
    assert_eq!(
        ours.list(&books_core::store::ListQuery::new(1024, 20))
            .await
            .unwrap()
            .total,
        1,
        "ranges reset too"
    );

    // Truncating authors takes their books with it (CASCADE), and names in cached pages.
    let version = ours.version().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("TRUNCATE {schema}.authors CASCADE")))
        .execute(&host)
        .await
        .unwrap();
    assert_ne!(ours.version().await.unwrap(), version);
    let (_, page) = call("GET", "/api/books?include=author", String::new()).await;
    assert_eq!(page["meta"]["total"], 0, "{page}");
}
