//! Every writer is seen: another store (another process), the host's own SQL, deep
//! pages after a host's bulk load; `TRUNCATE`, which fires no trigger, is refused, and a
//! host that goes around that gets its counts back with `recount`.

use books_core::BooksApi;
use books_core::store::{AuthorStore, ListQuery, Versions};

use super::*;

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_see_every_writer() {
    let cleanup = cleanup();
    let (ours, theirs, host) = two_stores_and_a_host(&cleanup).await;
    cache_is_exact_across_writers(ours, theirs, async |sql, author| {
        host_sql(&host, sql, author).await
    })
    .await;
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_pages_see_every_writer() {
    let cleanup = cleanup();
    let (ours, theirs, host) = two_stores_and_a_host(&cleanup).await;
    common::kept_pages_stay_exact_across_writers(ours, theirs, "", async |sql, author| {
        host_sql(&host, sql, author).await
    })
    .await;
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_pages_cross_groups() {
    let cleanup = cleanup();
    let (ours, _, host) = two_stores_and_a_host(&cleanup).await;
    common::deep_pages_cross_groups(ours, async |sql, author| host_sql(&host, sql, author).await)
        .await;
}

/// A batch counts its own books (migration 0002), the trigger the host's beside it.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_creates_count_as_every_other_insert() {
    let cleanup = cleanup();
    let (ours, _, host) = two_stores_and_a_host(&cleanup).await;
    common::batched_creates_count_as_every_other_insert(ours, async |sql, author| {
        host_sql(&host, sql, author).await
    })
    .await;
}

/// Creates written together where a host's trigger rejects one and another names a
/// missing author: those two fail alone.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_create_fails_alone() {
    let cleanup = cleanup();
    let (ours, _, host) = two_stores_and_a_host(&cleanup).await;
    sqlx::raw_sql(
        "CREATE TRIGGER reject BEFORE INSERT ON books FOR EACH ROW \
         IF NEW.title = 'rejected' THEN \
         SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'rejected'; END IF",
    )
    .execute(&host)
    .await
    .unwrap();
    common::a_rejected_create_fails_alone(ours).await;
}

/// A host's trigger changes a book of a batch on its way: the batch is rolled back and
/// each create written alone.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_row_sends_its_batch_one_at_a_time() {
    let cleanup = cleanup();
    let (ours, _, host) = two_stores_and_a_host(&cleanup).await;
    sqlx::raw_sql(
        "CREATE TRIGGER shout BEFORE INSERT ON books FOR EACH ROW \
         IF NEW.title = 'shout' THEN SET NEW.title = 'SHOUT'; END IF",
    )
    .execute(&host)
    .await
    .unwrap();
    common::a_changed_row_sends_its_batch_one_at_a_time(ours).await;
}

/// `TRUNCATE` fires no trigger in MariaDB, so it is refused on both tables (a foreign
/// key references each): the data, the counts and every cached answer stay as they were.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_is_refused() {
    let cleanup = cleanup();
    let (ours, _, host) = two_stores_and_a_host(&cleanup).await;
    let author = ours.add_author(Some("A")).await.unwrap();
    host_sql(
        &host,
        "INSERT INTO books (title, author_id, year, created_at, updated_at) \
         VALUES ('Kept', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
        author,
    )
    .await;
    let version = ours.version().await.unwrap();
    for table in ["books", "authors"] {
        let truncated = sqlx::raw_sql(AssertSqlSafe(format!("TRUNCATE {table}")))
            .execute(&host)
            .await;
        let error = truncated.expect_err("refused");
        let number = error
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
            .map(|e| e.number());
        assert_eq!(number, Some(1701), "{table}: {error}");
    }
    assert_eq!(ours.version().await.unwrap(), version);
    let page = ours.list(&ListQuery::new(0, 20)).await.unwrap();
    assert_eq!((page.total, page.books[0].title.as_str()), (1, "Kept"));
}

/// A host that truncates with foreign-key checks off goes around the triggers: counts
/// and cached answers are stale until `recount`, which counts the books again and moves
/// the version.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recount_repairs_what_went_around_the_triggers() {
    let cleanup = cleanup();
    let (ours, _, host) = two_stores_and_a_host(&cleanup).await;
    let author = ours.add_author(Some("A")).await.unwrap();
    let api = BooksApi::new(ours.clone(), Config::default());
    let total = async || {
        let request = http::Request::get("/api/books")
            .body(String::new())
            .unwrap();
        let page: serde_json::Value =
            serde_json::from_slice(api.handle(request).await.body()).unwrap();
        page["meta"]["total"].as_u64().unwrap()
    };
    host_sql(
        &host,
        "INSERT INTO books (title, author_id, year, created_at, updated_at) \
         SELECT 'Bulk', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00' \
         FROM seq_1_to_3000",
        author,
    )
    .await;
    assert_eq!((total().await, total().await), (3000, 3000));
    let mut conn = host.acquire().await.unwrap();
    sqlx::raw_sql("SET foreign_key_checks = 0; TRUNCATE books; SET foreign_key_checks = 1")
        .execute(&mut *conn)
        .await
        .unwrap();
    assert_eq!(total().await, 3000, "stale: nothing saw the truncate");
    ours.recount().await.unwrap();
    assert_eq!(total().await, 0);
    host_sql(
        &host,
        "INSERT INTO books (title, author_id, year, created_at, updated_at) \
         SELECT 'Again', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00' \
         FROM seq_1_to_2000",
        author,
    )
    .await;
    assert_eq!(total().await, 2000);
    let deep = ours.list(&ListQuery::new(1500, 20)).await.unwrap();
    assert_eq!(
        (deep.total, deep.books.len()),
        (2000, 20),
        "ranges counted again"
    );
}
