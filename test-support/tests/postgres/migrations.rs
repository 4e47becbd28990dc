//! Our migrations beside a host's: either order, in a schema of our own, run by the
//! host's own tooling.

use super::*;

/// A host's pool may set its connections up itself (here `search_path` in
/// `after_connect`, which its options do not carry): the store's version checks go
/// through that pool, so they read the tables the store writes.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test]
async fn host_pool_set_up_in_after_connect_checks_through_it() {
    let cleanup = cleanup();
    let schema = fresh_schema(&cleanup).await;
    let mut conn = PgConnection::connect(&url()).await.unwrap();
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let set_up = format!("SET search_path TO {schema}");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .after_connect(move |conn, _| {
            let set_up = set_up.clone();
            Box::pin(async move {
                sqlx::query(AssertSqlSafe(set_up)).execute(conn).await?;
                Ok(())
            })
        })
        .connect(&url())
        .await
        .unwrap();
    // The host runs our migrations with its own tooling, on its own connections.
    PostgresStore::migrator().run(&pool).await.unwrap();
    let store = PostgresStore::from_pool(pool);
    let before = store.version().await.unwrap();
    books_core::store::AuthorStore::add_author(&store, Some("A"))
        .await
        .unwrap();
    assert_ne!(
        store.version().await.unwrap(),
        before,
        "sees the store's write"
    );
}

/// The host's pool over "its database": a fresh schema first on its `search_path`.
async fn host_pool(cleanup: &Cleanup) -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect_with(fresh_options(cleanup).await)
        .await
        .expect("host pool")
}

/// The versions of our embedded migrations.
fn ours() -> Vec<i64> {
    PostgresStore::migrator()
        .iter()
        .map(|m| m.version)
        .collect()
}

/// The versions recorded in a bookkeeping table of the host's schema.
async fn versions(pool: &PgPool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {table} ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_migrations_and_ours_share_one_database_in_either_order() {
    let cleanup = cleanup();
    for ours_first in [true, false] {
        let pool = host_pool(&cleanup).await;
        let store = PostgresStore::from_pool(pool.clone());
        if ours_first {
            store.migrate().await.unwrap();
            host_migrator().run(&pool).await.unwrap();
        } else {
            host_migrator().run(&pool).await.unwrap();
            store.migrate().await.unwrap();
        }
        store.migrate().await.expect("our re-run is a no-op");
        host_migrator()
            .run(&pool)
            .await
            .expect("the host's re-run is a no-op");
        assert_eq!(versions(&pool, "_sqlx_migrations").await, [20250101000000]);
        assert_eq!(versions(&pool, MIGRATIONS_TABLE).await, ours());
        api_works(store).await;
    }
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_tables_live_in_the_schema_the_host_names() {
    let cleanup = cleanup();
    let pool = host_pool(&cleanup).await;
    sqlx::raw_sql(
        "CREATE TABLE authors (login TEXT PRIMARY KEY); \
         CREATE TABLE books (isbn TEXT PRIMARY KEY, shelf INTEGER); \
         INSERT INTO books VALUES ('978-0', 3)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = PostgresStore::from_pool(pool.clone())
        .in_schema(&fresh_schema(&cleanup).await)
        .unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.expect("re-run is a no-op");
    api_works(store.clone()).await;
    assert_eq!(
        store
            .list(&books_core::store::ListQuery::new(0, 20))
            .await
            .unwrap()
            .total,
        1
    );
    let shelf: i32 = sqlx::query_scalar("SELECT shelf FROM books WHERE isbn = '978-0'")
        .fetch_one(&pool)
        .await
        .expect("the host's own books table, untouched");
    assert_eq!(shelf, 3);
    assert!(matches!(
        PostgresStore::from_pool(pool).in_schema("Bad-Name"),
        Err(books_sqlx::Error::InvalidSchema(_))
    ));
}

/// The title indexes' definitions and whether each is valid.
async fn title_indexes(pool: &PgPool) -> Vec<(String, bool, String)> {
    sqlx::query_as(
        "SELECT c.relname::text, i.indisvalid, pg_get_indexdef(i.indexrelid) \
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_class t ON t.oid = i.indrelid \
         WHERE t.relname = 'books' AND t.relnamespace = to_regnamespace(current_schema()) \
         AND c.relname LIKE 'books_title%' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Migration 3 runs online on the store's own connection: a database at migration 2
/// with books gets the same indexes as one migrated in a transaction (valid, on
/// `lower(title COLLATE "C")`), recorded under 0003's checksum (so an earlier release's
/// process, or a host's tooling, finds it applied); a run cut in half (an index left
/// under the new name, valid or not) finishes; and a version recorded by a later
/// release is left alone.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_3_builds_its_indexes_online_and_finishes_a_cut_run() {
    let cleanup = cleanup();
    // A database of its own: an index built concurrently waits for every transaction of
    // its database, other tests' included.
    let database = fresh_database(&cleanup).await;
    let mut admin = PgConnection::connect(&url()).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let options = PostgresStore::options(&url()).unwrap().database(&database);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options.clone())
        .await
        .unwrap();
    PostgresStore::migrator().run_to(2, &pool).await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO authors (name) VALUES ('A'); \
         INSERT INTO books (title, author_id, year, created_at, updated_at) \
         SELECT 'Book ' || n, 1, 2000, now(), now() FROM generate_series(1, 500) n",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = PostgresStore::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let online = title_indexes(&pool).await;

    // A schema migrated by sqlx's migrator, in a transaction: the same indexes.
    let other = host_pool(&cleanup).await;
    PostgresStore::migrator().run(&other).await.unwrap();
    let names = |indexes: &[(String, bool, String)]| {
        let mut names: Vec<(String, bool)> = indexes.iter().map(|i| (i.0.clone(), i.1)).collect();
        names.sort();
        names
    };
    assert_eq!(names(&online), names(&title_indexes(&other).await));
    assert!(online.iter().all(|(_, valid, _)| *valid), "{online:?}");
    assert!(
        online
            .iter()
            .all(|(_, _, def)| def.contains(r#"lower((title COLLATE "C"))"#)),
        "{online:?}"
    );
    assert_eq!(versions(&pool, MIGRATIONS_TABLE).await, ours());
    PostgresStore::migrator()
        .run(&pool)
        .await
        .expect("sqlx's migrator finds 0003 applied, under its checksum");

    // Cut in half: the build left an index under the new name, and 0003 unrecorded.
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DELETE FROM {MIGRATIONS_TABLE} WHERE version = 3; \
         CREATE INDEX books_title_next ON books (year)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    // A later release's migration, recorded.
    sqlx::raw_sql(AssertSqlSafe(format!(
        "INSERT INTO {MIGRATIONS_TABLE} (version, description, success, checksum, execution_time) \
         VALUES (99, 'later', TRUE, '\\x00', 0)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    store
        .migrate()
        .await
        .expect("the cut run finished; 99 left alone");
    assert_eq!(names(&title_indexes(&pool).await), names(&online));

    // While sqlx's migrator holds its lock on the database (an earlier release's process
    // migrating), the store waits for it, and goes on once it is released.
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DELETE FROM {MIGRATIONS_TABLE} WHERE version = 3"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let mut holder = PgConnection::connect_with(&options).await.unwrap();
    sqlx::migrate::Migrate::lock(&mut holder).await.unwrap();
    let migrating = tokio::spawn({
        let store = store.clone();
        async move { store.migrate().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!migrating.is_finished(), "the store waits for sqlx's lock");
    sqlx::migrate::Migrate::unlock(&mut holder).await.unwrap();
    let migrated = tokio::time::timeout(Duration::from_secs(30), migrating).await;
    migrated
        .expect("within 30 s")
        .unwrap()
        .expect("migrated once the lock was free");
    let page = store.list(&books_core::store::ListQuery::new(0, 20)).await;
    assert_eq!(page.unwrap().total, 500, "the books, as they were");
}
