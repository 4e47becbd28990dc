//! Store failures map to 503 (with `Retry-After`) or 500, and never leak the store's message.

use async_trait::async_trait;
use books_core::store::{
    BookInput, BookPage, BookRecord, BookStore, Capabilities, Conditional, ConditionalWrites,
    IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate, ListQuery, Precondition,
    StoreError, Version, Versions,
};
use books_core::{BooksApi, Clock, Config};
use chrono::{DateTime, Utc};
use http::Request;

/// A store whose every call fails, in every tier.
#[derive(Debug)]
struct Failing {
    unavailable: bool,
}

const SECRET: &str = "SELECT * FROM books -- password=hunter2 at /var/lib/db";

impl Failing {
    fn error(&self) -> StoreError {
        if self.unavailable {
            StoreError::unavailable(SECRET)
        } else {
            StoreError::other(SECRET)
        }
    }
}

#[async_trait]
impl BookStore for Failing {
    async fn list(&self, _: &ListQuery) -> Result<BookPage, StoreError> {
        Err(self.error())
    }
    async fn get(&self, _: i64) -> Result<Option<BookRecord>, StoreError> {
        Err(self.error())
    }
    async fn create(&self, _: &BookInput, _: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        Err(self.error())
    }
    async fn update(
        &self,
        _: i64,
        _: &BookInput,
        _: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        Err(self.error())
    }
    async fn delete(&self, _: i64) -> Result<bool, StoreError> {
        Err(self.error())
    }
    async fn author_exists(&self, _: i64) -> Result<bool, StoreError> {
        Err(self.error())
    }
    fn capabilities(self: std::sync::Arc<Self>) -> Capabilities<Self> {
        Capabilities::of(self)
            .versions()
            .conditional_writes()
            .idempotent_creates()
    }
}

#[async_trait]
impl Versions for Failing {
    async fn version(&self) -> Result<Version, StoreError> {
        Err(self.error())
    }
    async fn list_versioned(&self, _: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        Err(self.error())
    }
    async fn get_versioned(&self, _: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        Err(self.error())
    }
}

#[async_trait]
impl ConditionalWrites for Failing {
    async fn update_if(
        &self,
        _: i64,
        _: &BookInput,
        _: DateTime<Utc>,
        _: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        Err(self.error())
    }
    async fn delete_if(
        &self,
        _: i64,
        _: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        Err(self.error())
    }
}

#[async_trait]
impl IdempotentCreates for Failing {
    async fn create_keyed(
        &self,
        _: &BookInput,
        _: DateTime<Utc>,
        _: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        Err(self.error())
    }
    async fn idempotency_record(
        &self,
        _: &str,
        _: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        Err(self.error())
    }
    async fn forget_expired_keys(&self, _: DateTime<Utc>, _: u32) -> Result<u64, StoreError> {
        Err(self.error())
    }
}

async fn answers(unavailable: bool) -> Vec<(u16, Option<String>, String)> {
    let api = BooksApi::new(Failing { unavailable }, Config::default());
    let requests = [
        Request::get("/api/books").body(String::new()),
        Request::get("/api/books/1").body(String::new()),
        Request::delete("/api/books/1").body(String::new()),
        Request::post("/api/books").body("title=T&author_id=1&year=2020".to_owned()),
        Request::put("/api/books/1").body("title=T&author_id=1&year=2020".to_owned()),
        Request::get("/api/books/1")
            .header("accept", "application/xml")
            .body(String::new()),
        Request::put("/api/books/1")
            .header("if-match", "\"abc\"")
            .body("title=T&author_id=1&year=2020".to_owned()),
        Request::delete("/api/books/1")
            .header("if-match", "*")
            .body(String::new()),
        Request::post("/api/books")
            .header("idempotency-key", "k1")
            .body("title=T&author_id=1&year=2020".to_owned()),
    ];
    let mut out = Vec::new();
    for request in requests {
        let response = api.handle(request.unwrap()).await;
        let retry = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = String::from_utf8(response.body().to_vec()).unwrap();
        out.push((response.status().as_u16(), retry, body));
    }
    out
}

#[tokio::test]
async fn unavailable_store_is_503_with_retry_after() {
    for (status, retry, body) in answers(true).await {
        assert_eq!(status, 503, "{body}");
        assert_eq!(retry.as_deref(), Some("1"));
        assert!(body.contains("Service unavailable"), "{body}");
        assert!(
            !body.contains("hunter2") && !body.contains("SELECT"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn other_store_failure_is_500_without_internals() {
    for (status, retry, body) in answers(false).await {
        assert_eq!(status, 500, "{body}");
        assert_eq!(retry, None);
        assert!(body.contains("Internal server error"), "{body}");
        assert!(
            !body.contains("hunter2") && !body.contains("/var/lib"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn ping_needs_no_store() {
    let api = BooksApi::new(Failing { unavailable: true }, Config::default());
    let request = Request::get("/api/ping").body(String::new()).unwrap();
    assert_eq!(api.handle(request).await.status(), 200);
}

/// A clock one second later at each read.
#[derive(Debug, Default)]
struct Ticking(std::sync::atomic::AtomicI64);

impl Clock for Ticking {
    fn now(&self) -> DateTime<Utc> {
        let read = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        DateTime::from_timestamp(1_781_524_800 + read, 0).expect("a date")
    }
}

#[tokio::test]
async fn the_extended_ping_is_dated_by_its_own_second() {
    let config = Config::default()
        .with_extended_ping(true)
        .with_clock(Ticking::default());
    let api = BooksApi::new(Failing { unavailable: true }, config);
    for _ in 0..3 {
        let request = Request::get("/api/ping").body(String::new()).unwrap();
        let response = api.handle(request).await;
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        let time = DateTime::parse_from_rfc3339(body["time"].as_str().unwrap()).unwrap();
        let date = response.headers()["date"].to_str().unwrap();
        let date = DateTime::parse_from_rfc2822(date).unwrap();
        assert_eq!(date, time, "Date and the body's time name one second");
    }
}

#[test]
fn owns_only_paths_under_the_prefix() {
    let api = BooksApi::new(Failing { unavailable: true }, Config::default());
    assert!(api.owns("/api"));
    assert!(api.owns("/api/books"));
    assert!(!api.owns("/apix"));
    assert!(!api.owns("/health"));
    let root = BooksApi::new(
        Failing { unavailable: true },
        Config::default().with_prefix("/"),
    );
    assert!(root.owns("/anything"));
}
