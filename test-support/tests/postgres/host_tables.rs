//! Another program's write transaction left open, beside the store and beside a host's own
//! tables under books-sqlx's [`VersionTriggers`]: it holds up no unrelated writer on the
//! counters; and books-sqlx's reads, key records and retries over a host's own schema.

use books_sqlx::VersionTriggers;
use books_sqlx::sqlx::Postgres;

use super::*;

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_write_holds_up_no_unrelated_writer() {
    let cleanup = cleanup();
    let schema = fresh_schema(&cleanup).await;
    let pool = PgPoolOptions::new()
        .max_connections(3)
        .connect(&url())
        .await
        .unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE SCHEMA {schema}; \
         CREATE TABLE {schema}.people (person_code INTEGER PRIMARY KEY, display_name TEXT); \
         CREATE TABLE {schema}.titles (title_code BIGINT GENERATED ALWAYS AS IDENTITY \
             PRIMARY KEY, heading TEXT NOT NULL, \
             penned_by INTEGER REFERENCES {schema}.people ON DELETE SET NULL)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let version = VersionTriggers::<Postgres>::new(
        &format!("{schema}.api_version"),
        &format!("{schema}.titles"),
    )
    .and_then(|version| version.also(&format!("{schema}.people")))
    .unwrap();
    version.install(&pool).await.unwrap();
    let mut reader = pool.acquire().await.unwrap();
    let before = version.version(&mut reader).await.unwrap();

    // Another program writes a title and a person and keeps its transaction open.
    let mut open = pool.begin().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "INSERT INTO {schema}.people VALUES (1, 'Held'); \
         INSERT INTO {schema}.titles (heading, penned_by) VALUES ('held', 1)"
    )))
    .execute(&mut *open)
    .await
    .unwrap();

    // Unrelated writes, each its own transaction with a bounded wait for locks: with a
    // slot drawn at random, one in 16 would wait for the open transaction (32 writes:
    // 87% that one does).
    let mut writer = PgConnection::connect(&url()).await.unwrap();
    sqlx::raw_sql("SET lock_timeout = '2s'")
        .execute(&mut writer)
        .await
        .unwrap();
    for n in 0..32 {
        let write = match n % 3 {
            0 => format!("INSERT INTO {schema}.titles (heading) VALUES ('free {n}')"),
            1 => format!("UPDATE {schema}.titles SET heading = 'again' WHERE heading LIKE 'free%'"),
            _ => format!("INSERT INTO {schema}.people VALUES ({}, 'P')", 100 + n),
        };
        sqlx::raw_sql(AssertSqlSafe(write))
            .execute(&mut writer)
            .await
            .unwrap_or_else(|error| panic!("write {n} waited on the open transaction: {error}"));
    }
    let after = version.version(&mut reader).await.unwrap();
    assert_eq!(after.history, before.history);
    assert!(after.count > before.count, "{before:?} then {after:?}");

    // The open transaction commits into its own slot: both writers counted.
    open.commit().await.unwrap();
    let total: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT CAST(SUM(n) AS BIGINT) FROM {schema}.api_version"
    )))
    .fetch_one(&mut *reader)
    .await
    .unwrap();
    assert_eq!(total, 12, "11 free titles and the held one");
    assert!(version.version(&mut reader).await.unwrap().count > after.count);
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_write_left_open_holds_up_no_write_of_the_store() {
    use books_core::store::{AuthorStore, BookInput, ListQuery};

    let cleanup = cleanup();
    let store = fresh(&cleanup).await;
    let schema = store.schema().expect("a schema").to_owned();
    let author = store.add_author(Some("A")).await.unwrap();
    let book = |n: i32| BookInput {
        title: format!("free {n}"),
        author_id: author,
        year: 2000 + n,
    };
    let first = store.create(&book(0), chrono::Utc::now()).await.unwrap();

    // The host inserts a book and keeps its transaction open.
    let host = PgPool::connect(&url()).await.unwrap();
    let mut open = host.begin().await.unwrap();
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {schema}.books (title, author_id, year, created_at, updated_at) \
         VALUES ('held', $1, 1999, now(), now())"
    )))
    .bind(author)
    .execute(&mut *open)
    .await
    .unwrap();

    // The store's creates take the ids after the held one, each of them in another slot
    // of the first id's choosing before; an update and a delete beside them. None may
    // wait for the open transaction.
    let bounded = Duration::from_secs(2);
    for n in 1..=32 {
        let created = tokio::time::timeout(bounded, store.create(&book(n), chrono::Utc::now()))
            .await
            .unwrap_or_else(|_| panic!("create {n} waited on the open transaction"))
            .unwrap();
        if n % 8 == 0 {
            tokio::time::timeout(
                bounded,
                store.update(first.id, &book(n), chrono::Utc::now()),
            )
            .await
            .unwrap_or_else(|_| panic!("update {n} waited on the open transaction"))
            .unwrap();
            tokio::time::timeout(bounded, store.delete(created.id))
                .await
                .unwrap_or_else(|_| panic!("delete {n} waited on the open transaction"))
                .unwrap();
        }
    }
    let total = |store: PostgresStore| async move {
        let page = store.list(&ListQuery::new(0, 1)).await;
        page.unwrap().total
    };
    assert_eq!(total(store.clone()).await, 1 + 32 - 4);
    open.commit().await.unwrap();
    assert_eq!(
        total(store.clone()).await,
        1 + 32 - 4 + 1,
        "the held book counted too"
    );
}

/// A new schema of the host's, empty, and a pool of three.
async fn host_schema(cleanup: &Cleanup) -> (String, PgPool) {
    let schema = fresh_schema(cleanup).await;
    let pool = PgPoolOptions::new()
        .max_connections(3)
        .connect(&url())
        .await
        .unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .unwrap();
    (schema, pool)
}

/// books-sqlx's key records over a table in a host's schema.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_records_over_a_host_table() {
    let cleanup = cleanup();
    let (schema, pool) = host_schema(&cleanup).await;
    common::parts::key_records_keep_replay_and_expire(&pool, &format!("{schema}.api_keys")).await;
}

/// books-sqlx's reads over a host's tables of other names.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn book_tables_over_host_tables() {
    let cleanup = cleanup();
    let (schema, pool) = host_schema(&cleanup).await;
    let host = common::parts::HostTables {
        schema: format!("{schema}."),
        create: [
            "CREATE TABLE {s}people (person_code BIGINT PRIMARY KEY, display_name TEXT)",
            "CREATE TABLE {s}titles (title_code BIGINT PRIMARY KEY, heading TEXT NOT NULL, \
             released INTEGER NOT NULL, penned_by BIGINT, inserted_at TIMESTAMPTZ NOT NULL, \
             touched_at TIMESTAMPTZ NOT NULL)",
        ],
        begin_write: "BEGIN",
        time: "TIMESTAMPTZ '2026-01-01 00:00:00+00'",
    };
    common::parts::book_tables_read_in_the_api_names(&pool, host).await;
}

/// books-sqlx's retry of a transaction PostgreSQL rolled back to break a deadlock.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossed_writes_are_sent_again() {
    let cleanup = cleanup();
    let (schema, pool) = host_schema(&cleanup).await;
    common::parts::crossed_writes_are_sent_again(&pool, &format!("{schema}.pairs")).await;
}
