//! The PostgreSQL store against the shared suites, in a fresh schema per test.
//!
//! The server comes from `BOOKS_TEST_POSTGRES_URL` (for example
//! `postgres://postgres@127.0.0.1:5432/test`). Without it the tests skip with a message,
//! except under `CI=true`, where a skip is a failure.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use books_core::BookStore;
use books_core::testing::InProcess;
use books_core::{BooksApi, Config, StoreError};
use books_sqlx::sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use books_sqlx::sqlx::{self, AssertSqlSafe, Connection, PgConnection};
use books_sqlx::{MIGRATIONS_TABLE, PostgresStore, push};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OnceCell;

const URL_VAR: &str = "BOOKS_TEST_POSTGRES_URL";

/// Whether the PostgreSQL tests can run; panics under CI when they cannot.
async fn available() -> bool {
    static CHECKED: OnceCell<bool> = OnceCell::const_new();
    *CHECKED
        .get_or_init(|| async {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
            let Ok(url) = std::env::var(URL_VAR) else {
                assert!(
                    !in_ci,
                    "{URL_VAR} is not set: PostgreSQL tests cannot be skipped in CI"
                );
                loud(&format!("set {URL_VAR} (see README)"));
                return false;
            };
            match PgConnection::connect(&url).await {
                Ok(conn) => {
                    claim_run(conn).await;
                    true
                }
                Err(error) => {
                    assert!(
                        !in_ci,
                        "PostgreSQL at {URL_VAR} is unreachable in CI: {error}"
                    );
                    loud(&error.to_string());
                    false
                }
            }
        })
        .await
}

/// Writes past the test harness's output capture, so a skip is seen.
fn loud(why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPING PostgreSQL tests: {why} ***\n"
    );
}

const SCHEMA_PREFIX: &str = "books_test_";

/// This run's number: its schemas are `books_test_<run>_<n>`.
fn run() -> u32 {
    static RUN: OnceLock<u32> = OnceLock::new();
    *RUN.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        (std::process::id() ^ nanos.rotate_left(16)) & 0x7fff_ffff
    })
}

/// Holds an advisory lock named by this run for as long as the process lives (the
/// connection is kept, never closed), then drops the schemas of every run whose lock
/// nobody holds: runs that ended. A run going on in parallel keeps its schemas.
async fn claim_run(mut conn: PgConnection) {
    sqlx::query("SELECT pg_advisory_lock($1, $2)")
        .bind(LOCK_SPACE)
        .bind(run() as i32)
        .execute(&mut conn)
        .await
        .expect("lock this run");
    let schemas: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'books\\_test\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("list schemas");
    let mut cleaner = PgConnection::connect(&url()).await.expect("connect");
    for schema in schemas {
        let Some(owner) = schema
            .strip_prefix(SCHEMA_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|run| run.parse::<i32>().ok())
        else {
            continue;
        };
        let ended: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
            .bind(LOCK_SPACE)
            .bind(owner)
            .fetch_one(&mut cleaner)
            .await
            .expect("probe a run's lock");
        if ended {
            sqlx::query(AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE"
            )))
            .execute(&mut cleaner)
            .await
            .expect("drop an ended run's schema");
            sqlx::query("SELECT pg_advisory_unlock($1, $2)")
                .bind(LOCK_SPACE)
                .bind(owner)
                .execute(&mut cleaner)
                .await
                .expect("unlock");
        }
    }
    // Kept open to the end of the process: the lock says this run is alive.
    std::mem::forget(conn);
}

/// The first key of this suite's advisory locks (the second is the run).
const LOCK_SPACE: i32 = 0x626f6f6b; // "book"

fn url() -> String {
    std::env::var(URL_VAR).expect("checked by available()")
}

/// A new schema name for one test of this run.
fn fresh_schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{SCHEMA_PREFIX}{}_{}",
        run(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a new empty schema and returns options whose `search_path` is it.
async fn fresh_options() -> PgConnectOptions {
    let schema = fresh_schema();
    let mut conn = PgConnection::connect(&url()).await.expect("connect");
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .expect("create schema");
    PostgresStore::options(&url())
        .expect("options")
        .options([("search_path", schema.as_str())])
}

/// A migrated store with its tables in a schema of its own.
async fn fresh() -> PostgresStore {
    let store = PostgresStore::connect_lazy(&url())
        .expect("options")
        .in_schema(&fresh_schema())
        .expect("schema name");
    store.migrate().await.expect("migrate");
    store
}

mod common;
use common::{api_works, cache_is_exact_across_writers, host_migrator};

mod conformance {
    use super::*;
    books_core::store_conformance_suite!(fresh, skip_unless = available);
}

/// A migrated store in push mode, listening.
async fn fresh_pushing() -> PostgresStore {
    let store = fresh().await.listening();
    store.set_push(true).await.expect("push mode on");
    store
}

/// The contract holds with notifying triggers and a listener.
mod push_conformance {
    use super::*;
    books_core::store_conformance_suite!(fresh_pushing, skip_unless = available);
}

mod http_contract {
    use super::*;
    async fn in_process(config: Config) -> InProcess<PostgresStore> {
        InProcess::new(fresh().await, config)
    }
    books_core::http_contract_suite!(in_process, skip_unless = available);
}

async fn get(api: &BooksApi, path: &str) -> u16 {
    let request = http::Request::get(path).body(String::new()).unwrap();
    api.handle(request).await.status().as_u16()
}

/// A store of a fresh migrated schema that reaches the server through `port` (where
/// nothing listens until a [`Proxy`] does), and the real server's address.
async fn migrated_behind(port: u16) -> (PostgresStore, String) {
    let options = fresh_options().await;
    let real = format!("{}:{}", options.get_host(), options.get_port());
    PostgresStore::connect_lazy_with(options.clone())
        .migrate()
        .await
        .unwrap();
    let store = PostgresStore::connect_lazy_with(options.host("127.0.0.1").port(port));
    (store, real)
}

/// A store pointed at a port where nothing listens answers 503; once a server answers
/// there (a proxy to the real one), the same store works without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_503_then_recovers() {
    if !available().await {
        return;
    }
    let port = free_port().await;
    let (store, real) = migrated_behind(port).await;
    let api = BooksApi::new(store, Config::default());

    let started = Instant::now();
    assert_eq!(get(&api, "/api/books").await, 503);
    assert_eq!(get(&api, "/api/books/1").await, 503);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "fails fast: {:?}",
        started.elapsed()
    );
    assert_eq!(get(&api, "/api/ping").await, 200);
    assert!(
        matches!(api.ready().await, Err(StoreError::Unavailable(_))),
        "not ready while nothing listens"
    );

    let _proxy = Proxy::start(port, real).await;
    assert_eq!(get(&api, "/api/books").await, 200);
    assert_eq!(get(&api, "/api/books/1").await, 404);
    api.ready().await.expect("ready once the server answers");
}

/// The version check runs on a connection of its own: when the way to the database goes
/// silent, a check gives up within its bound (503, not a hang) and the next one, once
/// the path is back, opens a fresh connection; cut off, checks fail until the database
/// can be reached again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_check_connection_recovers() {
    if !available().await {
        return;
    }
    let port = free_port().await;
    let (store, real) = migrated_behind(port).await;
    let proxy = Proxy::start(port, real.clone()).await;
    let version = store.version().await.unwrap();
    let unavailable = |result| matches!(result, Err(StoreError::Unavailable(_)));

    proxy.silence(true);
    let started = Instant::now();
    assert!(unavailable(store.version().await), "silent path");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gives up: {:?}",
        started.elapsed()
    );
    proxy.silence(false);
    assert_eq!(store.version().await.unwrap(), version, "path back");

    drop(proxy);
    assert!(unavailable(store.version().await), "cut off");
    assert!(unavailable(store.version().await), "still cut off");
    let _proxy = Proxy::start(port, real).await;
    assert_eq!(store.version().await.unwrap(), version, "reachable again");
}

/// A host's pool may set its connections up itself (here `search_path` in
/// `after_connect`, which its options do not carry): the store's version checks go
/// through that pool, so they read the tables the store writes.
#[tokio::test]
async fn host_pool_set_up_in_after_connect_checks_through_it() {
    if !available().await {
        return;
    }
    let schema = fresh_schema();
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
    books_core::AuthorStore::add_author(&store, Some("A"))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_migrations_and_ours_share_one_database_in_either_order() {
    if !available().await {
        return;
    }
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

/// Before 0.2 our versions went into sqlx's default table, where a host's migrator
/// then failed with `VersionMissing`. The next `migrate` moves them into our own table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_recorded_in_sqlx_default_table_are_adopted() {
    if !available().await {
        return;
    }
    let pool = host_pool().await;
    let mut old_layout = PostgresStore::migrator();
    old_layout.dangerous_set_table_name("_sqlx_migrations");
    old_layout.run(&pool).await.unwrap();
    host_migrator()
        .set_ignore_missing(true)
        .run(&pool)
        .await
        .unwrap();

    let store = PostgresStore::from_pool(pool.clone());
    store.migrate().await.expect("adopts our versions");
    store.migrate().await.expect("and re-runs as a no-op");
    host_migrator()
        .run(&pool)
        .await
        .expect("the host's migrator no longer finds our versions");
    assert_eq!(versions(&pool, "_sqlx_migrations").await, [20250101000000]);
    assert_eq!(versions(&pool, MIGRATIONS_TABLE).await, ours());
    api_works(store).await;
}

/// A host with `books` and `authors` tables of its own puts ours in a schema it names;
/// its pool's `search_path` is left alone, and the counter's triggers find their table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_tables_live_in_the_schema_the_host_names() {
    if !available().await {
        return;
    }
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
        .in_schema(&fresh_schema())
        .unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.expect("re-run is a no-op");
    api_works(store.clone()).await;
    assert_eq!(store.list(0, 20).await.unwrap().total, 1);
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

/// Two stores on one schema, as two API processes would have, the schema, and the
/// host's own pool.
async fn two_stores_and_a_host() -> (PostgresStore, PostgresStore, String, PgPool) {
    let ours = fresh().await;
    let schema = ours.schema().expect("a schema").to_owned();
    let theirs = PostgresStore::connect_lazy(&url())
        .unwrap()
        .in_schema(&schema)
        .unwrap();
    let host = PgPool::connect(&url()).await.unwrap();
    (ours, theirs, schema, host)
}

async fn host_sql(host: &PgPool, schema: &str, sql: &str, author: i64) {
    sqlx::query(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
        .bind(author)
        .execute(host)
        .await
        .unwrap();
}

/// Creates sent at once go to the database in fewer statements than creates (a host's
/// statement-level trigger counts them), also for a role with rights on the tables only
/// (none on the id sequence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_sent_together_share_statements_under_a_table_only_role() {
    if !available().await {
        return;
    }
    let (owner, _, schema, host) = two_stores_and_a_host().await;
    let setup = "DO $$ BEGIN CREATE ROLE books_test_writer LOGIN; \
                 EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$; \
                 GRANT USAGE ON SCHEMA {n} TO books_test_writer; \
                 GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {n} \
                     TO books_test_writer; \
                 CREATE TABLE {s}statements (n INT); \
                 CREATE FUNCTION {s}count_statement() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN INSERT INTO statements VALUES (1); RETURN NULL; END $$ SECURITY DEFINER; \
                 ALTER FUNCTION {s}count_statement() SET search_path = {n}; \
                 CREATE TRIGGER count_statement AFTER INSERT ON {s}books \
                 FOR EACH STATEMENT EXECUTE FUNCTION {s}count_statement()";
    let setup = setup
        .replace("{s}", &format!("{schema}."))
        .replace("{n}", &schema);
    sqlx::raw_sql(AssertSqlSafe(setup))
        .execute(&host)
        .await
        .unwrap();
    let author = books_core::AuthorStore::add_author(&owner, Some("A"))
        .await
        .unwrap();
    let options = PostgresStore::options(&url())
        .unwrap()
        .username("books_test_writer");
    let writer = PostgresStore::connect_lazy_with(options)
        .in_schema(&schema)
        .unwrap();
    let books: Vec<_> = (0..20)
        .map(|n| books_core::BookInput {
            title: format!("book {n}"),
            author_id: author,
            year: 2020,
        })
        .collect();
    let now = chrono::DateTime::UNIX_EPOCH;
    let sent = books.iter().map(|book| writer.create(book, now));
    for (book, created) in books.iter().zip(futures_util::future::join_all(sent).await) {
        assert_eq!(created.unwrap().title, book.title);
    }
    let statements: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {schema}.statements"
    )))
    .fetch_one(&host)
    .await
    .unwrap();
    assert!(statements < 10, "{statements} statements for 20 creates");
    assert_eq!(writer.list(0, 1).await.unwrap().total, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_create_fails_alone() {
    if !available().await {
        return;
    }
    let (ours, _, schema, host) = two_stores_and_a_host().await;
    let sql = "CREATE FUNCTION {s}reject() RETURNS trigger LANGUAGE plpgsql AS $$ \
               BEGIN IF NEW.title = 'rejected' THEN RAISE EXCEPTION 'rejected'; END IF; \
               RETURN NEW; END $$; \
               CREATE TRIGGER reject BEFORE INSERT ON {s}books \
               FOR EACH ROW EXECUTE FUNCTION {s}reject()";
    sqlx::raw_sql(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
        .execute(&host)
        .await
        .unwrap();
    common::a_rejected_create_fails_alone(ours).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_sees_every_writer() {
    if !available().await {
        return;
    }
    let (ours, theirs, schema, host) = two_stores_and_a_host().await;
    common::version_sees_every_writer(ours, theirs, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_see_every_writer() {
    if !available().await {
        return;
    }
    let (ours, theirs, schema, host) = two_stores_and_a_host().await;
    cache_is_exact_across_writers(ours, theirs, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

/// Concurrent creates spread their counts over slots (no single hot row), and once a
/// statement moves ids on to the next range, the closed range's slots fold into one row:
/// a deep page's prefix sum reads one row per closed range; a bulk insert adds one row per
/// range. Totals stay exact throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_spread_then_fold() {
    use futures_util::StreamExt;
    if !available().await {
        return;
    }
    let store = fresh().await;
    let schema = store.schema().unwrap().to_owned();
    let author = books_core::AuthorStore::add_author(&store, Some("A"))
        .await
        .unwrap();
    let create = |n: usize| {
        let store = store.clone();
        async move {
            let book = books_core::BookInput {
                title: format!("Book {n}"),
                author_id: author,
                year: 2020,
            };
            store.create(&book, chrono::Utc::now()).await.unwrap();
        }
    };
    let host = PgPool::connect(&url()).await.unwrap();
    let count = async |sql: &str| -> i64 {
        sqlx::query_scalar(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
            .fetch_one(&host)
            .await
            .unwrap()
    };
    let stream = futures_util::stream::iter(0..1000).map(create);
    stream.buffer_unordered(16).collect::<Vec<()>>().await;
    let slots = "SELECT COUNT(*) FROM {s}book_count WHERE n <> 0";
    assert!(count(slots).await > 1, "counts spread over slots");
    let open = "SELECT COUNT(*) FROM {s}book_ranges WHERE bucket = 0";
    assert!(count(open).await > 1, "the open range has several slots");
    // One statement of `n` books, counted by the trigger once.
    let insert = async |n: u32| {
        count(&format!(
            "WITH done AS (INSERT INTO {{s}}books (title, author_id, year, created_at, \
             updated_at) SELECT 'Bulk', {author}, 2020, now(), now() \
             FROM generate_series(1, {n}) RETURNING 1) SELECT COUNT(*) FROM done"
        ))
        .await
    };
    // One statement that enters the next range past its first id (ids 1001 to 1100, as
    // a batch of creates may) folds the range it closed.
    insert(100).await;
    assert_eq!(count(open).await, 1, "the closed range folded into one row");
    let total = "SELECT SUM(n)::BIGINT FROM {s}book_ranges";
    assert_eq!(count(total).await, 1100);
    // A bulk insert counts once per statement: one row per range it fills.
    insert(3000).await;
    let bulk_ranges = "SELECT COUNT(*) FROM {s}book_ranges WHERE bucket BETWEEN 2 AND 3";
    assert_eq!(
        count(bulk_ranges).await,
        2,
        "one row for each range the bulk filled"
    );
    assert_eq!(count(total).await, 4100);
    assert_eq!(store.list(0, 1).await.unwrap().total, 4100);
    assert_eq!(store.list(4099, 5).await.unwrap().books.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_pages_cross_groups() {
    if !available().await {
        return;
    }
    let (ours, _, schema, host) = two_stores_and_a_host().await;
    common::deep_pages_cross_groups(ours, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

/// Waits up to 5 s for the store's known version to satisfy `want`.
async fn known_until(store: &PostgresStore, what: &str, want: impl Fn(Option<u64>) -> bool) {
    known_within(Duration::from_secs(5), store, what, want).await;
}

/// Waits up to `bound` for the store's known version to satisfy `want`.
async fn known_within(
    bound: Duration,
    store: &PostgresStore,
    what: &str,
    want: impl Fn(Option<u64>) -> bool,
) {
    let deadline = Instant::now() + bound;
    while !want(store.known_version()) {
        assert!(
            Instant::now() < deadline,
            "{what}: known version still {:?} after {bound:?}",
            store.known_version()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A loopback port nothing listens on (for now).
async fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// A TCP proxy to the real server on `port` that can be cut (every connection with it)
/// or silenced (connections stay open, nothing gets through: a dead network path).
struct Proxy(tokio::task::JoinHandle<()>, Arc<AtomicBool>);

impl Proxy {
    async fn start(port: u16, real: String) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let quiet = silent.clone();
        Self(
            tokio::spawn(async move {
                let mut links = tokio::task::JoinSet::new();
                loop {
                    let (client, _) = listener.accept().await.unwrap();
                    let server = TcpStream::connect(&real).await.unwrap();
                    let ((from_client, to_client), (from_server, to_server)) =
                        (client.into_split(), server.into_split());
                    links.spawn(pipe(from_client, to_server, quiet.clone()));
                    links.spawn(pipe(from_server, to_client, quiet.clone()));
                }
            }),
            silent,
        )
    }

    /// Whether bytes stop getting through (they are read and dropped).
    fn silence(&self, silent: bool) {
        self.1.store(silent, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until either side closes; while `silent`, drops what it reads.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(read @ 1..) = from.read(&mut buffer).await {
        if !silent.load(Ordering::Relaxed) && to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

impl Drop for Proxy {
    /// Cuts every connection: dropping the task drops its `JoinSet`, which aborts them.
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Push mode follows writers the API never sees (another store, the host's SQL), turns
/// off and on for every listener, and gives way while the listener cannot reach the
/// database: within its bound when the path goes silent, at once when it is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_mode_follows_every_writer() {
    if !available().await {
        return;
    }
    let (direct, theirs, schema, host) = two_stores_and_a_host().await;
    let options = PostgresStore::options(&url()).unwrap();
    let real = format!("{}:{}", options.get_host(), options.get_port());
    let port = free_port().await;
    let proxy = Proxy::start(port, real.clone()).await;
    let ours = PostgresStore::connect_lazy_with(options.host("127.0.0.1").port(port))
        .in_schema(&schema)
        .unwrap()
        .listening();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ours.known_version(), None, "push mode is off by default");
    theirs.set_push(true).await.unwrap();
    let current = async || direct.version().await.unwrap();
    let now = current().await;
    known_until(&ours, "turned on elsewhere", |known| known == now).await;

    let author = books_core::AuthorStore::add_author(&theirs, Some("A"))
        .await
        .unwrap();
    let now = current().await;
    known_until(&ours, "another store's write", |known| known == now).await;
    host_sql(
        &host,
        &schema,
        "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
         VALUES ('Host', $1, 2020, now(), now())",
        author,
    )
    .await;
    let now = current().await;
    known_until(&ours, "the host's SQL", |known| known == now).await;

    // The way to the database goes silent (a dead network path, no reset): the listener
    // gives way within its bound (a read every second at the latest, 1 s timeout).
    proxy.silence(true);
    let bound = push::HEARTBEAT + push::PROBE_TIMEOUT;
    known_within(bound + Duration::from_secs(2), &ours, "silenced", |known| {
        known.is_none()
    })
    .await;
    proxy.silence(false);
    host_sql(
        &host,
        &schema,
        "UPDATE {s}authors SET name = 'C' WHERE id = $1",
        author,
    )
    .await;
    let now = current().await;
    let back = Duration::from_secs(10);
    known_within(back, &ours, "heard again", |known| known == now).await;
    // Cut: it stays away until the database can be reached again.
    drop(proxy);
    known_until(&ours, "cut off", |known| known.is_none()).await;
    host_sql(
        &host,
        &schema,
        "UPDATE {s}authors SET name = 'B' WHERE id = $1",
        author,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ours.known_version(), None, "still cut off");
    let _proxy = Proxy::start(port, real).await;
    let now = current().await;
    known_until(&ours, "reconnected", |known| known == now).await;

    theirs.set_push(false).await.unwrap();
    known_until(&ours, "turned off elsewhere", |known| known.is_none()).await;
}

/// Through the API in push mode: cached answers follow the host's SQL within the bound,
/// and the API's own writes are seen at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_mode_cache_follows_the_host() {
    if !available().await {
        return;
    }
    let (ours, _, schema, host) = two_stores_and_a_host().await;
    let store = ours.listening();
    store.set_push(true).await.unwrap();
    let author = books_core::AuthorStore::add_author(&store, Some("A"))
        .await
        .unwrap();
    let api = BooksApi::new(store.clone(), Config::default());
    let title = async |path: &str| {
        let request = http::Request::get(path).body(String::new()).unwrap();
        let body = api.handle(request).await.into_body();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        json["title"].as_str().unwrap_or_default().to_owned()
    };
    let created = api
        .handle(
            http::Request::post("/api/books")
                .header("content-type", "application/json")
                .body(format!(
                    r#"{{"title":"Mine","author_id":{author},"year":2020}}"#
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(created.status(), 201);
    assert_eq!(
        title("/api/books/1").await,
        "Mine",
        "our own write, at once"
    );
    let now = store.version().await.unwrap();
    known_until(&store, "caught up", |known| known == now).await;
    assert_eq!(title("/api/books/1").await, "Mine");
    assert_eq!(title("/api/books/1").await, "Mine", "a cached answer");
    host_sql(
        &host,
        &schema,
        "UPDATE {s}books SET title = 'Theirs' WHERE author_id = $1",
        author,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while title("/api/books/1").await != "Theirs" {
        assert!(
            Instant::now() < deadline,
            "the host's write unseen after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
