//! The whole HTTP contract through the warp filter (`warp::test`), composed with a host's
//! own routes, plus what only a binding can get wrong.

use async_trait::async_trait;
use books_core::store::AuthorStore;
use books_core::testing::Harness;
use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use bytes::Bytes;
use http::{Request, Response};
use warp::Filter;
use warp::filters::BoxedFilter;
use warp::reply::Reply;

/// The API mounted beside host routes, as an embedding service would.
fn app(api: BooksApi) -> BoxedFilter<(warp::reply::Response,)> {
    let health = warp::path!("health").map(|| "up");
    // Path before method: warp ranks a method rejection above "not found", so a
    // method-first host route would turn every unknown path into a 405.
    let host_post = warp::path!("api-like" / "submit")
        .and(warp::post())
        .map(|| "posted");
    books_warp::routes(api)
        .or(health)
        .or(host_post)
        .map(Reply::into_response)
        .boxed()
}

struct ThroughWarp {
    filter: BoxedFilter<(warp::reply::Response,)>,
    store: MemStore,
}

#[async_trait]
impl Harness for ThroughWarp {
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes> {
        let (parts, body) = request.into_parts();
        let mut test = warp::test::request()
            .method(parts.method.as_str())
            .path(&parts.uri.to_string());
        for (name, value) in &parts.headers {
            test = test.header(name, value);
        }
        test.body(body).reply(&self.filter).await
    }

    async fn add_author(&self, name: Option<&str>) -> i64 {
        self.store.add_author(name).await.unwrap()
    }

    async fn remove_author(&self, id: i64) {
        self.store.remove_author(id).await.unwrap();
    }
}

async fn through_warp(config: Config) -> ThroughWarp {
    let store = MemStore::new();
    ThroughWarp {
        filter: app(BooksApi::new(store.clone(), config)),
        store,
    }
}

books_core::http_contract_suite!(through_warp);

#[tokio::test]
async fn host_routes_still_answer_beside_the_api() {
    let filter = app(BooksApi::new(MemStore::new(), Config::default()));
    let health = warp::test::request().path("/health").reply(&filter).await;
    assert_eq!(
        (health.status().as_u16(), &health.body()[..]),
        (200, &b"up"[..])
    );
    let host = warp::test::request()
        .method("POST")
        .path("/api-like/submit")
        .reply(&filter)
        .await;
    assert_eq!(host.body(), "posted");
    let ping = warp::test::request().path("/api/ping").reply(&filter).await;
    assert_eq!(ping.body(), r#"{"status":"ok"}"#);
    let outside = warp::test::request().path("/nowhere").reply(&filter).await;
    assert_eq!(
        outside.status(),
        404,
        "outside the prefix: the host's own 404"
    );
}

#[tokio::test]
async fn inside_the_prefix_no_warp_rejection_leaks() {
    let filter = app(BooksApi::new(MemStore::new(), Config::default()));
    for (method, path) in [
        ("POST", "/api/health"),
        ("DELETE", "/api/ping"),
        ("GET", "/api/books/x/y"),
    ] {
        let reply = warp::test::request()
            .method(method)
            .path(path)
            .reply(&filter)
            .await;
        let content_type = reply.headers()["content-type"].to_str().unwrap();
        assert_eq!(content_type, "application/problem+json", "{method} {path}");
    }
}
