//! Our migrations beside a host's: either order, several processes at once, a database
//! of our own, and a migration cut in half.

use books_core::store::ListQuery;
use books_sqlx::MIGRATIONS_TABLE;

use super::*;

/// The versions recorded in a bookkeeping table.
async fn versions(pool: &MySqlPool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {table} ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The versions of our embedded migrations.
fn ours() -> Vec<i64> {
    MySqlStore::migrator().iter().map(|m| m.version).collect()
}

/// The host's pool over "its database": a fresh one.
async fn host_pool(cleanup: &Cleanup) -> MySqlPool {
    MySqlPool::connect_with(options_in(&fresh_database(cleanup).await))
        .await
        .expect("host pool")
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_migrations_and_ours_share_one_database_in_either_order() {
    let cleanup = cleanup();
    for ours_first in [true, false] {
        let pool = host_pool(&cleanup).await;
        let store = MySqlStore::from_pool(pool.clone());
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

/// Processes that start together migrate one at a time (sqlx's `GET_LOCK`): all of
/// them succeed, and the migrations are recorded once.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_start_together_migrate_once() {
    let cleanup = cleanup();
    let options = options_in(&fresh_database(&cleanup).await);
    let stores: Vec<MySqlStore> = (0..6)
        .map(|_| MySqlStore::connect_lazy_with(options.clone()))
        .collect();
    let migrated = futures_util::future::join_all(stores.iter().map(MySqlStore::migrate)).await;
    for outcome in migrated {
        outcome.expect("every process migrates");
    }
    assert_eq!(versions(stores[0].pool(), MIGRATIONS_TABLE).await, ours());
    api_works(stores[5].clone()).await;
}

/// MariaDB's DDL commits as it goes: a migration cut in half (here: bookkeeping that
/// says unfinished, and part of the tables) is run again in full at the next start.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_cut_in_half_is_finished_at_the_next_start() {
    let cleanup = cleanup();
    let pool = host_pool(&cleanup).await;
    let migrator = MySqlStore::migrator();
    let sql = migrator.iter().next().unwrap().sql.as_str();
    let half = &sql[..sql.find("CREATE PROCEDURE").expect("a procedure")];
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {MIGRATIONS_TABLE} (version BIGINT PRIMARY KEY, \
         description TEXT NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, \
         success BOOLEAN NOT NULL, checksum BLOB NOT NULL, execution_time BIGINT NOT NULL); \
         INSERT INTO {MIGRATIONS_TABLE} VALUES (1, 'books', NOW(), FALSE, '', -1); {half}"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let store = MySqlStore::from_pool(pool.clone());
    store.migrate().await.expect("finished");
    assert_eq!(versions(&pool, MIGRATIONS_TABLE).await, ours());
    let success: Vec<bool> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT success FROM {MIGRATIONS_TABLE}"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(success, vec![true; ours().len()]);
    api_works(store.clone()).await;
    assert_eq!(store.list(&ListQuery::new(0, 20)).await.unwrap().total, 1);
}

/// A host's own `books` table is not taken for ours: the migration fails on it, and a
/// store in a database of its own keeps its tables apart.
#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_tables_live_in_the_database_the_host_names() {
    let cleanup = cleanup();
    let pool = host_pool(&cleanup).await;
    sqlx::raw_sql(
        "CREATE TABLE books (isbn VARCHAR(20) PRIMARY KEY, shelf INT); \
         INSERT INTO books VALUES ('978-0', 3)",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert!(
        MySqlStore::from_pool(pool.clone()).migrate().await.is_err(),
        "the host's books table is not ours"
    );
    let ours = fresh_database(&cleanup).await;
    let store = MySqlStore::from_pool(pool.clone())
        .in_database(&ours)
        .unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.expect("re-run is a no-op");
    api_works(store.clone()).await;
    assert_eq!(store.list(&ListQuery::new(0, 20)).await.unwrap().total, 1);
    let shelf: i32 = sqlx::query_scalar("SELECT shelf FROM books WHERE isbn = '978-0'")
        .fetch_one(&pool)
        .await
        .expect("the host's own books table, untouched");
    assert_eq!(shelf, 3);
    assert!(matches!(
        MySqlStore::from_pool(pool).in_database("Bad-Name"),
        Err(books_sqlx::Error::InvalidSchema(_))
    ));
}
