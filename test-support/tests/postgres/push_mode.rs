//! Push mode: the contract with notifying triggers, following every writer, giving way
//! while the listener cannot reach the database.

use super::*;
use books_core::store::Version;

/// A migrated store in push mode, listening.
async fn fresh_pushing(cleanup: &Cleanup) -> PostgresStore {
    let store = fresh(cleanup).await.listening();
    store.set_push(true).await.expect("push mode on");
    store
}

/// The contract holds with notifying triggers and a listener.
mod push_conformance {
    use super::*;
    books_core::store_conformance_suite! {
        #[cfg_attr(not(books_test_postgres), ignore = "BOOKS_TEST_POSTGRES_URL is not set")]
        setup: fresh_pushing,
        tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
        outside_writes: host_writes,
        guard: cleanup,
    }
}

/// Waits up to 5 s for the store's known version to satisfy `want`.
pub async fn known_until(
    store: &PostgresStore,
    what: &str,
    want: impl Fn(Option<Version>) -> bool,
) {
    known_within(Duration::from_secs(5), store, what, want).await;
}

/// Waits up to `bound` for the store's known version to satisfy `want`.
pub async fn known_within(
    bound: Duration,
    store: &PostgresStore,
    what: &str,
    want: impl Fn(Option<Version>) -> bool,
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

/// Push mode follows writers the API never sees (another store, the host's SQL), turns
/// off and on for every listener, and gives way while the listener cannot reach the
/// database: within its bound when the path goes silent, at once when it is cut.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_mode_follows_every_writer() {
    let cleanup = cleanup();
    let (direct, theirs, schema, host) = two_stores_and_a_host(&cleanup).await;
    let options = PostgresStore::options(&url()).unwrap();
    let real = format!("{}:{}", options.get_host(), options.get_port());
    let port = free_port();
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
    known_until(&ours, "turned on elsewhere", |known| known == Some(now)).await;

    let author = books_core::store::AuthorStore::add_author(&theirs, Some("A"))
        .await
        .unwrap();
    let now = current().await;
    known_until(&ours, "another store's write", |known| known == Some(now)).await;
    host_sql(
        &host,
        &schema,
        "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
         VALUES ('Host', $1, 2020, now(), now())",
        author,
    )
    .await;
    let now = current().await;
    known_until(&ours, "the host's SQL", |known| known == Some(now)).await;

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
    known_within(back, &ours, "heard again", |known| known == Some(now)).await;
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
    known_until(&ours, "reconnected", |known| known == Some(now)).await;

    theirs.set_push(false).await.unwrap();
    known_until(&ours, "turned off elsewhere", |known| known.is_none()).await;
}

/// Through the API in push mode: cached answers follow the host's SQL within the bound,
/// and the API's own writes are seen at once.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_mode_cache_follows_the_host() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    let store = ours.listening();
    store.set_push(true).await.unwrap();
    let author = books_core::store::AuthorStore::add_author(&store, Some("A"))
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
    known_until(&store, "caught up", |known| known == Some(now)).await;
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
