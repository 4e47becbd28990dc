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
    let _cleanup = cleanup();
    let schema = fresh_schema().await;
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
async fn host_pool() -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect_with(fresh_options().await)
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
    let _cleanup = cleanup();
    for ours_first in [true, false] {
        let pool = host_pool().await;
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
    let _cleanup = cleanup();
    let pool = host_pool().await;
    sqlx::raw_sql(
        "CREATE TABLE authors (login TEXT PRIMARY KEY); \
         CREATE TABLE books (isbn TEXT PRIMARY KEY, shelf INTEGER); \
         INSERT INTO books VALUES ('978-0', 3)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = PostgresStore::from_pool(pool.clone())
        .in_schema(&fresh_schema().await)
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
