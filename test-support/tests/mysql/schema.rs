//! What the schema keeps: four-byte characters, 255-character titles, times in UTC
//! whatever the session's zone, ids up to `i64::MAX`.

use books_core::store::{AuthorStore, BookInput, ListQuery};
use chrono::{TimeZone, Utc};

use super::*;

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_byte_characters_and_255_character_titles_round_trip() {
    let _cleanup = cleanup();
    let store = fresh().await;
    let author = store.add_author(Some("作者 🦀")).await.unwrap();
    let title = "📚".repeat(255);
    let book = BookInput {
        title: title.clone(),
        author_id: author,
        year: 2020,
    };
    let created = store.create(&book, Utc::now()).await.unwrap();
    let read = store.get(created.id).await.unwrap().unwrap();
    assert_eq!(read.title, title);
    assert_eq!(read.author_name.as_deref(), Some("作者 🦀"));
}

/// A host pool whose sessions are in another time zone reads and writes the same
/// instants: the columns are `DATETIME(6)` holding UTC, and sqlx's options keep the
/// store's own sessions in UTC.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_are_utc_whatever_the_session_time_zone() {
    let _cleanup = cleanup();
    let database = fresh_database().await;
    let ours = MySqlStore::connect_lazy_with(options_in(&database));
    ours.migrate().await.unwrap();
    let elsewhere = MySqlPool::connect_with(options_in(&database).timezone(Some("+05:30".into())))
        .await
        .unwrap();
    let theirs = MySqlStore::from_pool(elsewhere);
    let author = ours.add_author(None).await.unwrap();
    let at = Utc.with_ymd_and_hms(2026, 3, 1, 12, 30, 15).unwrap()
        + chrono::TimeDelta::microseconds(123_456);
    let book = BookInput {
        title: "T".into(),
        author_id: author,
        year: 2020,
    };
    let created = theirs.create(&book, at).await.unwrap();
    assert_eq!(created.created_at, at);
    let read = ours.get(created.id).await.unwrap().unwrap();
    assert_eq!((read.created_at, read.updated_at), (at, at));
}

/// Ids up to `i64::MAX`: a book a host inserted with the largest id is read, listed and
/// deleted like any other.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_up_to_i64_max() {
    let _cleanup = cleanup();
    let (store, _, host) = two_stores_and_a_host().await;
    let author = store.add_author(None).await.unwrap();
    host_sql(
        &host,
        "INSERT INTO books (id, title, author_id, year, created_at, updated_at) \
         VALUES (9223372036854775807, 'Last', $1, 2020, '2026-01-01', '2026-01-01')",
        author,
    )
    .await;
    let book = store.get(i64::MAX).await.unwrap().expect("found");
    assert_eq!(book.title, "Last");
    let page = store.list(&ListQuery::new(0, 20)).await.unwrap();
    assert_eq!((page.total, page.books[0].id), (1, i64::MAX));
    assert!(store.delete(i64::MAX).await.unwrap());
    assert_eq!(store.list(&ListQuery::new(0, 20)).await.unwrap().total, 0);
}
