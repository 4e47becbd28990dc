//! The server binary on the open internet: CORS for named origins only, compression with
//! an ETag per encoding, per-client rate limits that spare the operator endpoints, and
//! HTTP/2 with prior knowledge on the HTTP/1.1 port.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::{Answer, call, server};
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

const APP: &str = "https://app.example";

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    call(addr, "GET", path, headers, "").await
}

fn cors_fields(answer: &Answer) -> Vec<String> {
    answer
        .headers
        .keys()
        .map(|name| name.as_str().to_owned())
        .filter(|name| name.starts_with("access-control-"))
        .collect()
}

#[tokio::test]
async fn cors_answers_named_origins_only() {
    let (_child, addr) = server(&["--database-url", "memory", "--cors-origin", APP]).await;
    let preflight = |origin: &'static str, path: &'static str| async move {
        let headers = [
            ("origin", origin),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "content-type, if-match"),
        ];
        call(addr, "OPTIONS", path, &headers, "").await
    };
    let allowed = preflight(APP, "/api/books/1").await;
    assert_eq!(allowed.status, 204);
    assert_eq!(allowed.header("access-control-allow-origin"), Some(APP));
    assert_eq!(
        allowed.header("access-control-allow-methods"),
        Some("DELETE, GET, HEAD, OPTIONS, PUT"),
        "the route table's methods for the path"
    );
    let headers = allowed.header("access-control-allow-headers").unwrap();
    for name in [
        "Content-Type",
        "Authorization",
        "If-Match",
        "If-None-Match",
        "Idempotency-Key",
        "X-Request-Id",
    ] {
        assert!(headers.contains(name), "{name} in {headers}");
    }
    assert!(allowed.header("access-control-max-age").is_some());
    let list = preflight(APP, "/api/books").await;
    assert_eq!(
        list.header("access-control-allow-methods"),
        Some("GET, HEAD, OPTIONS, POST")
    );

    // Another origin gets the API's own OPTIONS answer and nothing CORS.
    let other = preflight("https://evil.example", "/api/books/1").await;
    assert_eq!(other.status, 204);
    assert_eq!(
        other.header("allow"),
        Some("DELETE, GET, HEAD, OPTIONS, PUT")
    );
    assert_eq!(cors_fields(&other), Vec::<String>::new());
    // So does an OPTIONS that is no preflight.
    let plain = call(addr, "OPTIONS", "/api/books/1", &[("origin", APP)], "").await;
    assert_eq!(
        plain.header("allow"),
        Some("DELETE, GET, HEAD, OPTIONS, PUT")
    );

    let read = get(addr, "/api/books/1", &[("origin", APP)]).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.header("access-control-allow-origin"), Some(APP));
    let exposed = read.header("access-control-expose-headers").unwrap();
    for name in [
        "ETag",
        "Location",
        "X-Request-Id",
        "Retry-After",
        "RateLimit",
        "RateLimit-Policy",
        "Idempotent-Replayed",
    ] {
        assert!(exposed.contains(name), "{name} in {exposed}");
    }
    let varies: Vec<_> = read.headers.get_all("vary").iter().collect();
    assert!(varies.iter().any(|v| *v == "Origin"), "{varies:?}");
    let other = get(addr, "/api/books/1", &[("origin", "https://evil.example")]).await;
    assert_eq!(other.status, 200);
    assert_eq!(cors_fields(&other), Vec::<String>::new());
    let none = get(addr, "/api/books/1", &[]).await;
    assert_eq!(cors_fields(&none), Vec::<String>::new());
}

#[tokio::test]
async fn compressed_pages_have_their_own_strong_tags() {
    let (_child, addr) = server(&["--database-url", "memory"]).await;
    let page = "/api/books?include=author";
    let plain = get(addr, page, &[]).await;
    let identity = plain.header("etag").unwrap().to_owned();
    let mut tags = vec![identity.clone()];
    for coding in ["gzip", "br", "zstd"] {
        let answer = get(addr, page, &[("accept-encoding", coding)]).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-encoding"), Some(coding));
        assert_eq!(answer.header("vary"), Some("Accept, Accept-Encoding"));
        let tag = answer.header("etag").unwrap().to_owned();
        assert!(
            tag.starts_with('"') && !tag.starts_with("W/"),
            "strong: {tag}"
        );
        assert!(!tags.contains(&tag), "{tag} is {coding}'s own");
        tags.push(tag.clone());
        let body = books_core::testing::decoded(coding, &answer.body);
        assert_eq!(body, plain.body);
        let again = [("accept-encoding", coding), ("if-none-match", tag.as_str())];
        let not_modified = get(addr, page, &again).await;
        assert_eq!(not_modified.status, 304, "{coding}'s tag");
        assert_eq!(not_modified.header("etag"), Some(tag.as_str()));
    }
    let off = server(&["--database-url", "memory", "--compression", "false"]).await;
    let answer = get(off.1, page, &[("accept-encoding", "gzip")]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-encoding"), None);
    assert_eq!(answer.header("vary"), Some("Accept"));
}

#[tokio::test]
async fn past_the_rate_limit_clients_wait_and_operators_do_not() {
    let (_child, addr) = server(&["--database-url", "memory", "--rate-limit", "50"]).await;
    let first = get(addr, "/api/ping", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"client\";q=50;w=1")
    );
    assert!(
        first
            .header("ratelimit")
            .unwrap()
            .starts_with("\"client\";r=49;")
    );
    let mut limited = None;
    for _ in 0..200 {
        let answer = get(addr, "/api/books", &[]).await;
        if answer.status == 429 {
            limited = Some(answer);
            break;
        }
        assert_eq!(answer.status, 200);
    }
    let limited = limited.expect("a 429 within 200 requests at 50 a second");
    assert_eq!(
        limited.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(limited.json()["title"], "Too Many Requests");
    assert_eq!(limited.header("cache-control"), Some("no-store"));
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    assert!(limited.header("ratelimit").unwrap().contains("r=0"));
    for path in ["/livez", "/readyz", "/metrics"] {
        let answer = get(addr, path, &[]).await;
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.header("cache-control"), Some("no-store"), "{path}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        get(addr, "/api/ping", &[]).await.status,
        200,
        "after waiting"
    );
}

#[tokio::test]
async fn forwarded_clients_count_apart_behind_a_trusted_proxy() {
    let args = [
        "--database-url",
        "memory",
        "--rate-limit",
        "3",
        "--trusted-proxies",
        "127.0.0.0/8",
    ];
    let (_child, addr) = server(&args).await;
    let from = |client: &'static str| async move {
        let forwarded = [("x-forwarded-for", client)];
        let mut statuses = Vec::new();
        for _ in 0..4 {
            statuses.push(get(addr, "/api/ping", &forwarded).await.status);
        }
        statuses
    };
    assert_eq!(from("198.51.100.1").await, [200, 200, 200, 429]);
    assert_eq!(from("198.51.100.2").await, [200, 200, 200, 429]);
    // A client cannot pose as another by prepending: the proxy appends what it saw.
    assert_eq!(from("198.51.100.9, 198.51.100.1").await, [429; 4]);
    // Untrusted peers' headers are ignored.
    let (_other, plain) = server(&["--database-url", "memory", "--rate-limit", "3"]).await;
    let mut statuses = Vec::new();
    for n in 0..4 {
        let client = format!("198.51.100.{n}");
        statuses.push(
            get(plain, "/api/ping", &[("x-forwarded-for", &client)])
                .await
                .status,
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
}

#[tokio::test]
async fn http2_with_prior_knowledge_on_the_same_port() {
    let (_child, addr) = server(&["--database-url", "memory"]).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    // Several requests on one connection, at once.
    let requests = (0..8).map(|n| {
        let request = Request::get(format!("http://{addr}/api/books/{}", n % 4 + 1))
            .header("accept-encoding", "gzip")
            .body(Full::new(Bytes::new()))
            .unwrap();
        sender.send_request(request)
    });
    for response in futures_util::future::join_all(requests).await {
        let response = response.unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.status(), 200);
        assert!(response.headers().contains_key("x-request-id"));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(serde_json::from_slice::<serde_json::Value>(&body).unwrap()["id"].is_i64());
    }
    let create = Request::post(format!("http://{addr}/api/books"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            r#"{"title":"Over h2","author_id":1,"year":2020}"#,
        )))
        .unwrap();
    let created = sender.send_request(create).await.unwrap();
    assert_eq!(created.status(), 201);
    // HTTP/1.1 on the same port still works.
    assert_eq!(get(addr, "/api/ping", &[]).await.status, 200);
}
