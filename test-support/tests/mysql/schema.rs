//! What the schema keeps: four-byte characters, 255-character titles, times in UTC
//! whatever the session's zone, ids up to `i64::MAX`; and key records in a host's own
//! database, books-sqlx's reads over a host's tables in MariaDB's default collation,
//! and its retry of a deadlocked transaction.

use books_core::store::{AuthorStore, BookInput, ListQuery};
use chrono::{TimeZone, Utc};

use super::*;

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_byte_characters_and_255_character_titles_round_trip() {
    let cleanup = cleanup();
    let store = fresh(&cleanup).await;
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
    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
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
    let cleanup = cleanup();
    let (store, _, host) = two_stores_and_a_host(&cleanup).await;
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

/// `ListClauses` over a host's own table, on MariaDB: `?` placeholders bound in order,
/// and a title column in MariaDB's default collation (`utf8mb4_general_ci`, which folds
/// accents and every letter's case) compared as the contract says — ASCII letters
/// case-insensitively, anything else exactly — by the filter and the sort alike.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_clauses_over_a_host_column_in_the_default_collation() {
    use books_core::store::{ListFilter, SortField, SortKey};
    use books_sqlx::sqlx::Arguments;
    use books_sqlx::sqlx::mysql::MySqlArguments;
    use books_sqlx::{BookColumns, Dialect, ListClauses};

    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
    let pool = MySqlPool::connect_with(options_in(&database))
        .await
        .unwrap();
    sqlx::raw_sql(
        "CREATE TABLE items (item_no BIGINT PRIMARY KEY, \
         label VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, \
         pub_year INT NOT NULL, creator_no BIGINT, ins_ts DATETIME, upd_ts DATETIME); \
         INSERT INTO items VALUES (1, 'Élan', 2000, 7, NOW(), NOW()), \
         (2, 'ELAN vital', 2001, 7, NOW(), NOW()), (3, 'Sans élan', 2002, 7, NOW(), NOW()), \
         (4, 'elan', 2003, 8, NOW(), NOW()), (5, 'Ébène', 2004, 7, NOW(), NOW())",
    )
    .execute(&pool)
    .await
    .unwrap();
    let columns = BookColumns {
        id: "item_no",
        title: "label",
        year: "pub_year",
        author_id: "creator_no",
        created_at: "ins_ts",
        updated_at: "upd_ts",
        folded_title: None,
    };
    let ids = async |title: &str, authors: Vec<i64>, sort: Vec<SortKey>| {
        let mut filter = ListFilter::default();
        filter.title = Some(title.into());
        filter.author_ids = authors;
        let query = ListQuery::new(0, 20).with_filter(filter).with_sort(sort);
        let clauses = ListClauses::new(Dialect::MySql, &columns, &query, 1);
        let mut arguments = MySqlArguments::default();
        clauses.add_to(&mut arguments).unwrap();
        arguments.add(20_i64).unwrap();
        let text = format!(
            "SELECT item_no FROM items WHERE {} ORDER BY {} LIMIT ?",
            clauses.condition.unwrap(),
            clauses.order
        );
        let found: Vec<i64> = sqlx::query_scalar_with(AssertSqlSafe(text), arguments)
            .fetch_all(&pool)
            .await
            .unwrap();
        found
    };
    assert_eq!(ids("élan", vec![7], vec![]).await, [3], "é is not É, nor e");
    assert_eq!(
        ids("elan", vec![7, 8], vec![]).await,
        [2, 4],
        "ASCII case folded"
    );
    let by_title = vec![SortKey {
        field: SortField::Title,
        descending: false,
    }];
    // ASCII letters lowered, then by code point: "Éb" before "Él".
    assert_eq!(ids("n", vec![7, 8], by_title).await, [4, 2, 3, 5, 1]);
}

/// books-sqlx's key records over a table in a host's database.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_records_over_a_host_table() {
    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
    let pool = MySqlPool::connect_with(options_in(&database))
        .await
        .unwrap();
    common::parts::key_records_keep_replay_and_expire(&pool, &format!("{database}.api_keys")).await;
}

/// books-sqlx's reads over a host's tables of other names, the title in MariaDB's default
/// case-insensitive collation.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn book_tables_over_host_tables() {
    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
    let pool = MySqlPool::connect_with(options_in(&database))
        .await
        .unwrap();
    let host = common::parts::HostTables {
        schema: format!("{database}."),
        create: [
            "CREATE TABLE {s}people (person_code BIGINT PRIMARY KEY, \
             display_name VARCHAR(100)) DEFAULT CHARSET = utf8mb4",
            "CREATE TABLE {s}titles (title_code BIGINT PRIMARY KEY, \
             heading VARCHAR(255) NOT NULL, released INT NOT NULL, penned_by BIGINT, \
             inserted_at DATETIME(6) NOT NULL, touched_at DATETIME(6) NOT NULL) \
             DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci",
        ],
        begin_write: "BEGIN",
        time: "'2026-01-01 00:00:00'",
    };
    common::parts::book_tables_read_in_the_api_names(&pool, host).await;
}

/// books-sqlx's retry of a transaction MariaDB rolled back to break a deadlock.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossed_writes_are_sent_again() {
    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
    let pool = MySqlPool::connect_with(options_in(&database))
        .await
        .unwrap();
    common::parts::crossed_writes_are_sent_again(&pool, &format!("{database}.pairs")).await;
}
