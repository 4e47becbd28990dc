//! Through PgBouncer in transaction mode (Debian's 1.18: no prepared statements in the
//! pooler) with `ignore_startup_parameters = extra_float_digits` and nothing more: the
//! whole conformance and HTTP suites, migrations from several stores at once, the
//! statement time bound, nothing left behind on the pooler's server connections, push
//! mode listening on a direct connection.

use std::str::FromStr;

use books_core::store::AuthorStore;
use books_test_support::PgBouncer;

use super::*;

/// The port of one PgBouncer in front of the test server, shared by this binary's tests
/// (it stops when the binary ends).
pub(super) fn bouncer_port() -> Option<u16> {
    static PORT: OnceLock<Option<u16>> = OnceLock::new();
    *PORT.get_or_init(|| {
        let server = PgConnectOptions::from_str(&url()).ok()?;
        PgBouncer::start(server.get_port()).map(PgBouncer::until_exit)
    })
}

/// The test database through the pooler.
fn pooled_url() -> String {
    let server = PgConnectOptions::from_str(&url()).expect("the test URL");
    format!(
        "postgres://{}@127.0.0.1:{}/{}",
        server.get_username(),
        books_test_support::started(bouncer_port(), "PgBouncer"),
        server.get_database().unwrap_or("postgres")
    )
}

/// A store through the pooler on `schema`, not migrated.
fn pooled_on(schema: &str) -> PostgresStore {
    PostgresStore::connect_lazy(&pooled_url())
        .expect("options")
        .transaction_pooler(true)
        .in_schema(schema)
        .expect("schema name")
}

/// A store of a fresh schema, migrated through the pooler.
async fn pooled(cleanup: &Cleanup) -> PostgresStore {
    let store = pooled_on(&fresh_schema(cleanup).await);
    store.migrate().await.expect("migrate through the pooler");
    store
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        #[cfg_attr(not(all(books_test_postgres, books_test_pgbouncer)), ignore = "needs BOOKS_TEST_POSTGRES_URL and PgBouncer")]
        setup: pooled,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
        guard: cleanup,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(cleanup: &Cleanup, config: Config) -> InProcess<PostgresStore> {
        InProcess::new(pooled(cleanup).await, config)
    }
    books_core::http_contract_suite! {
        #[cfg_attr(not(all(books_test_postgres, books_test_pgbouncer)), ignore = "needs BOOKS_TEST_POSTGRES_URL and PgBouncer")]
        make: in_process,
        outside_writes: host_writes,
        guard: cleanup,
    }
}

/// Many requests at once through a pooler with fewer server connections than clients
/// (each store has ten): the pooler hands every transaction to whichever server
/// connection is free, and nothing a store sent is left on it — no prepared statement,
/// no session setting.
#[cfg_attr(
    not(all(books_test_postgres, books_test_pgbouncer)),
    ignore = "needs BOOKS_TEST_POSTGRES_URL and PgBouncer"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_left_on_the_poolers_connections() {
    let cleanup = cleanup();
    let store = pooled(&cleanup).await;
    let other = pooled_on(store.schema().unwrap());
    let author = store.add_author(Some("A")).await.unwrap();
    let api = BooksApi::new(store, Config::default());
    let others = BooksApi::new(other, Config::default());
    let requests = (0..200).map(|n| {
        let api = if n % 2 == 0 { &api } else { &others };
        let (method, path, body) = match n % 4 {
            0 => (
                "POST",
                "/api/books".to_owned(),
                format!("title=B{n}&author_id={author}&year=2020"),
            ),
            1 => ("GET", "/api/books?include=author".to_owned(), String::new()),
            2 => ("GET", format!("/api/books/{}", n / 4 + 1), String::new()),
            _ => ("GET", "/api/books?page=2".to_owned(), String::new()),
        };
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .body(body)
            .unwrap();
        api.handle(request)
    });
    for response in futures_util::future::join_all(requests).await {
        assert!(
            response.status().is_success() || response.status() == 404,
            "{:?}: {:?}",
            response.status(),
            response.body()
        );
    }
    let mut client = PgConnection::connect(&pooled_url()).await.unwrap();
    for _ in 0..30 {
        // The simple protocol: an unnamed statement outside a transaction may be parsed
        // on one server connection and executed on another, as the store knows.
        let row = sqlx::raw_sql(
            "SELECT current_setting('statement_timeout'), \
             (SELECT COUNT(*) FROM pg_prepared_statements)",
        )
        .fetch_one(&mut client)
        .await
        .unwrap();
        let (timeout, statements): (String, i64) = sqlx::FromRow::from_row(&row).unwrap();
        assert_eq!(timeout, "0", "no session setting leaks to other clients");
        assert_eq!(statements, 0, "no named statement stays behind");
    }
}

/// Behind a pooler the statement time bound still holds (set per transaction): a read
/// that waits on a host's lock gives up after it with a 503, and so does a write.
#[cfg_attr(
    not(all(books_test_postgres, books_test_pgbouncer)),
    ignore = "needs BOOKS_TEST_POSTGRES_URL and PgBouncer"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_are_bounded_through_the_pooler() {
    let cleanup = cleanup();
    let store = pooled(&cleanup).await;
    let author = store.add_author(Some("A")).await.unwrap();
    let schema = store.schema().unwrap().to_owned();
    let mut host = PgConnection::connect(&url()).await.unwrap();
    let mut lock = host.begin().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "LOCK TABLE {schema}.books IN ACCESS EXCLUSIVE MODE"
    )))
    .execute(&mut *lock)
    .await
    .unwrap();
    let started = Instant::now();
    let read = store.list(&books_core::store::ListQuery::new(0, 20)).await;
    assert!(matches!(read, Err(StoreError::Unavailable(_))), "{read:?}");
    let book = books_core::store::BookInput {
        title: "T".into(),
        author_id: author,
        year: 2020,
    };
    let write = store.create(&book, chrono::Utc::now()).await;
    assert!(
        matches!(write, Err(StoreError::Unavailable(_))),
        "{write:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(14),
        "each bounded by the 5 s statement timeout: {waited:?}"
    );
    lock.rollback().await.unwrap();
    assert_eq!(
        store
            .list(&books_core::store::ListQuery::new(0, 20))
            .await
            .unwrap()
            .total,
        0
    );
}

/// Several stores migrating one schema at once through the pooler: one applies the
/// migrations, the others find them applied (a transaction-level lock serialises them).
#[cfg_attr(
    not(all(books_test_postgres, books_test_pgbouncer)),
    ignore = "needs BOOKS_TEST_POSTGRES_URL and PgBouncer"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_migrate_at_once_through_the_pooler() {
    let cleanup = cleanup();
    let schema = fresh_schema(&cleanup).await;
    let stores: Vec<_> = (0..4).map(|_| pooled_on(&schema)).collect();
    let migrations = stores.iter().map(|store| store.migrate());
    for migrated in futures_util::future::join_all(migrations).await {
        migrated.expect("migrated, or found migrated");
    }
    let host = PgPool::connect(&url()).await.unwrap();
    let versions: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {schema}.{MIGRATIONS_TABLE} ORDER BY version"
    )))
    .fetch_all(&host)
    .await
    .unwrap();
    let ours: Vec<i64> = PostgresStore::migrator()
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, ours);
    // A direct store sees them applied, and its own migrator agrees with the records.
    let direct = PostgresStore::connect_lazy(&url())
        .unwrap()
        .in_schema(&schema)
        .unwrap();
    direct.migrate().await.expect("sqlx's migrator agrees");
    common::api_works(stores[0].clone()).await;
}

/// Push mode behind a pooler listens on a direct connection (`notify_with`); without
/// one there is nothing to listen on and the store stays exact.
#[cfg_attr(
    not(all(books_test_postgres, books_test_pgbouncer)),
    ignore = "needs BOOKS_TEST_POSTGRES_URL and PgBouncer"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_mode_listens_on_a_direct_connection() {
    let cleanup = cleanup();
    let store = pooled(&cleanup).await;
    let schema = store.schema().unwrap().to_owned();
    let direct = PostgresStore::options(&url()).unwrap();
    let listening = pooled_on(&schema).notify_with(direct).listening();
    let without = pooled_on(&schema).listening();
    store
        .set_push(true)
        .await
        .expect("push mode on, through the pooler");
    super::push_mode::known_until(&listening, "listening", |known| known.is_some()).await;
    let before = listening.known_version().unwrap();
    store.add_author(Some("A")).await.unwrap();
    super::push_mode::known_until(&listening, "follows a write", |known| {
        known.is_some_and(|known| known.count > before.count)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        without.known_version(),
        None,
        "no listener without a direct connection"
    );
    assert_eq!(
        without.version().await.unwrap(),
        store.version().await.unwrap(),
        "asks instead"
    );
}
