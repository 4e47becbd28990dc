//! The example server over real sockets: the whole HTTP contract through a real HTTP
//! client (SQLite and memory stores), and what only a real server can get wrong.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use books_api::{Limits, Options, Store};
use books_core::Config;
use books_core::store::AuthorStore;
use books_core::testing::Harness;
use bytes::Bytes;
use clap::Parser;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A server running in this process on an ephemeral loopback port.
struct Running {
    addr: SocketAddr,
    /// Whether the harness talks HTTP/2 (prior knowledge) rather than HTTP/1.1.
    http2: bool,
    store: Store,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn start(database_url: &str, config: Config, limits: Limits) -> Running {
        let store = Store::open(database_url, &Default::default())
            .await
            .expect("store");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let api = store.api(config);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(books_api::serve(listener, api, limits, async {
            let _ = stopped.await;
        }));
        Running {
            addr,
            http2: false,
            store,
            stop: Some(stop),
            task,
        }
    }

    async fn shutdown(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

/// Sends one request on a new connection with hyper's client.
async fn send(addr: SocketAddr, request: Request<Bytes>) -> Response<Bytes> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(http::header::HOST) {
        parts
            .headers
            .insert(http::header::HOST, addr.to_string().parse().unwrap());
    }
    let response = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.collect().await.unwrap().to_bytes())
}

/// Sends one request over HTTP/2 (prior knowledge) on a new connection: the target
/// made absolute, as HTTP/2 carries it (`:scheme`, `:authority`, `:path`).
async fn send_h2(addr: SocketAddr, request: Request<Bytes>) -> Response<Bytes> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = format!("http://{addr}{path}").parse().unwrap();
    let response = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.collect().await.unwrap().to_bytes())
}

#[async_trait]
impl Harness for Running {
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes> {
        if self.http2 {
            send_h2(self.addr, request).await
        } else {
            send(self.addr, request).await
        }
    }

    async fn add_author(&self, name: Option<&str>) -> i64 {
        self.store.add_author(name).await.unwrap()
    }

    async fn remove_author(&self, id: i64) {
        self.store.remove_author(id).await.unwrap();
    }
}

fn sqlite_url() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("server-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!(
        "{}-{}.db",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&path);
    format!("sqlite://{}", path.display())
}

mod over_sockets_on_sqlite {
    use super::*;
    async fn on_sqlite(config: Config) -> Running {
        Running::start(&sqlite_url(), config, Limits::default()).await
    }
    books_core::http_contract_suite!(on_sqlite);
}

mod over_sockets_on_memory {
    use super::*;
    async fn on_memory(config: Config) -> Running {
        Running::start("memory", config, Limits::default()).await
    }
    books_core::http_contract_suite!(on_memory);
}

/// The whole contract again over HTTP/2 on the same port.
mod over_http2_on_sqlite {
    use super::*;
    async fn on_sqlite_h2(config: Config) -> Running {
        Running {
            http2: true,
            ..Running::start(&sqlite_url(), config, Limits::default()).await
        }
    }
    books_core::http_contract_suite!(on_sqlite_h2);
}

/// Writes a chunked body far larger than the limit; the 413 must arrive long before the
/// client has sent it all (the server never buffers it whole).
#[tokio::test]
async fn chunked_oversized_body_gets_413_early() {
    let server = Running::start(
        "memory",
        Config::default().with_body_limit(64 * 1024),
        Limits::default(),
    )
    .await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = "POST /api/books HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
                Content-Type: application/x-www-form-urlencoded\r\n\r\n";
    write.write_all(head.as_bytes()).await.unwrap();
    let total: usize = 64 * 1024 * 1024;
    let writer = tokio::spawn(async move {
        let chunk = format!("{:x}\r\n{}\r\n", 16 * 1024, "a".repeat(16 * 1024));
        let mut sent = 0;
        while sent < total {
            if write.write_all(chunk.as_bytes()).await.is_err() {
                break;
            }
            sent += 16 * 1024;
        }
        sent
    });
    let mut response = vec![0; 1024];
    let read_bytes = tokio::time::timeout(Duration::from_secs(20), read.read(&mut response))
        .await
        .expect("an answer before the body ends")
        .unwrap();
    let text = String::from_utf8_lossy(&response[..read_bytes]).into_owned();
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(
        !writer.is_finished() || writer.await.unwrap() < total,
        "server read the whole body"
    );
    server.shutdown().await;
}

/// A request in flight when shutdown starts still gets its answer.
#[tokio::test]
async fn graceful_shutdown_finishes_the_request_in_flight() {
    let server = Running::start("memory", Config::default(), Limits::default()).await;
    let author = server.add_author(Some("A")).await;
    let body = format!("title=Late&author_id={author}&year=2020");
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /api/books HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..5]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let addr = server.addr;
    let stopping = tokio::spawn(server.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !stopping.is_finished(),
        "shutdown waits for the request in flight"
    );
    stream.write_all(&body.as_bytes()[5..]).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

/// A client that never finishes its headers (slowloris) is cut off.
#[tokio::test]
async fn slow_headers_are_cut_off() {
    let limits = Limits {
        header_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let server = Running::start("memory", Config::default(), limits).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /api/ping HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(
        closed.is_ok(),
        "connection still open after the header timeout"
    );
    let idle = TcpStream::connect(server.addr).await.unwrap();
    let mut idle = idle;
    let closed = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "an idle connection is closed too");
    server.shutdown().await;
}

/// The first bytes choose the protocol (HTTP/2's preface or HTTP/1.1) whatever segments
/// they come in: a request whose first segment could still begin the preface (`P`), or
/// could not (`G`, `PO`), is served as HTTP/1.1 either way.
#[tokio::test]
async fn first_bytes_in_pieces_are_served() {
    let server = Running::start("memory", Config::default(), Limits::default()).await;
    let author = server.add_author(Some("A")).await;
    let body = format!("title=Split&author_id={author}&year=2020");
    let post = format!(
        "POST /api/books HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let get = "GET /api/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_owned();
    for (request, split, status) in [(&post, 1, "201"), (&post, 2, "201"), (&get, 1, "200")] {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream
            .write_all(&request.as_bytes()[..split])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        stream
            .write_all(&request.as_bytes()[split..])
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer))
            .await
            .expect("answered")
            .unwrap();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "split after {split}: {answer}"
        );
    }
    server.shutdown().await;
}

/// An answer larger than a connection's buffer (the OpenAPI document, ~38 KB against
/// 16 KiB) arrives whole, its head and body written from one buffer.
#[tokio::test]
async fn large_answers_arrive_whole() {
    let server = Running::start("memory", Config::default(), Limits::default()).await;
    let request = Request::get("/api/openapi.json")
        .body(Bytes::new())
        .unwrap();
    let response = send(server.addr, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let length: usize = response.headers()[http::header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(length > 16 * 1024, "{length} bytes");
    assert_eq!(response.body().len(), length);
    let document: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    server.shutdown().await;
}

/// A body that trickles in slower than the request timeout loses its connection.
#[tokio::test]
async fn slow_bodies_are_cut_off() {
    let limits = Limits {
        request_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let server = Running::start("memory", Config::default(), limits).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"POST /api/books HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\ntitle=")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(
        closed.is_ok(),
        "connection still open after the request timeout"
    );
    server.shutdown().await;
}

/// The flags as a newcomer runs them: SQLite file, demo data, base URL from the address.
#[tokio::test]
async fn cli_defaults_serve_demo_data_from_sqlite() {
    let url = sqlite_url();
    let options =
        Options::try_parse_from(["server", "--database-url", &url, "--listen", "127.0.0.1:0"])
            .unwrap();
    assert!(options.extended_ping);
    let listener = TcpListener::bind(options.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (api, _) = books_api::build_api(&options, addr).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(books_api::serve(listener, api, options.limits(), async {
        let _ = stopped.await;
    }));
    let page = send(
        addr,
        Request::get("/api/books?page=3")
            .body(Bytes::new())
            .unwrap(),
    )
    .await;
    let body: serde_json::Value = serde_json::from_slice(page.body()).unwrap();
    assert_eq!(body["meta"]["total"], 45);
    assert_eq!(
        body["links"]["self"],
        format!("http://{addr}/api/books?page=3")
    );
    let ping = send(addr, Request::get("/api/ping").body(Bytes::new()).unwrap()).await;
    let ping: serde_json::Value = serde_json::from_slice(ping.body()).unwrap();
    assert_eq!(ping["version"], books_core::VERSION);
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();

    // A restart on the same file keeps the data and loads nothing twice.
    let (again, _) = books_api::build_api(&options, addr).await.unwrap();
    let request = Request::get("/api/books").body(String::new()).unwrap();
    let body: serde_json::Value =
        serde_json::from_slice(again.handle(request).await.body()).unwrap();
    assert_eq!(body["meta"]["total"], 45);
}

#[test]
fn cli_flags_parse() {
    let options = Options::try_parse_from([
        "server",
        "--route-scheme",
        "action",
        "--extended-ping",
        "false",
        "--page-size",
        "5",
        "--write-token",
        "t",
        "--base-url",
        "https://books.example.com/",
        "--log-format",
        "json",
    ])
    .unwrap();
    let config = options.config("0.0.0.0:8080".parse().unwrap());
    assert_eq!(config.route_scheme(), books_core::RouteScheme::Action);
    assert!(!config.extended_ping());
    assert_eq!(config.page_size().get(), 5);
    assert_eq!(config.write_token(), Some("t"));
    assert_eq!(config.base_url(), "https://books.example.com");
    assert!(Options::try_parse_from(["server", "--page-size", "0"]).is_err());
    assert!(Options::try_parse_from(["server", "--route-scheme", "sideways"]).is_err());
    let derived = Options::try_parse_from(["server"])
        .unwrap()
        .config("0.0.0.0:9000".parse().unwrap());
    assert_eq!(derived.base_url(), "http://localhost:9000");
}

#[tokio::test]
async fn unknown_database_url_is_refused() {
    use books_api::Error::{NotForThisDatabase, UnknownDatabase};
    let plain = books_sqlx::StoreSettings::default();
    assert!(matches!(
        Store::open("oracle://x", &plain).await,
        Err(UnknownDatabase(_))
    ));
    for url in ["memory", "mysql://x"] {
        let mut push = books_sqlx::StoreSettings::default();
        push.push = Some(true);
        assert!(matches!(
            Store::open(url, &push).await,
            Err(NotForThisDatabase("--push"))
        ));
    }
    let mut replicas = books_sqlx::StoreSettings::default();
    replicas.replica_urls = vec!["sqlite::memory:".into()];
    assert!(matches!(
        Store::open("sqlite::memory:", &replicas).await,
        Err(NotForThisDatabase("--replica-url"))
    ));
}

/// Sends raw bytes on a new connection, closes the sending side and returns all the
/// server wrote back before closing.
async fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("the server closes")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// What hyper lets through but HTTP/1.1 forbids is refused.
#[tokio::test]
async fn malformed_http_is_refused() {
    let server = Running::start("memory", Config::default(), Limits::default()).await;
    let no_host = raw(server.addr, b"GET /api/ping HTTP/1.1\r\n\r\n").await;
    assert!(no_host.starts_with("HTTP/1.1 400"), "{no_host}");
    assert!(no_host.contains("A Host header is required."), "{no_host}");
    let old = raw(server.addr, b"GET /api/ping HTTP/1.0\r\n\r\n").await;
    assert!(
        old.starts_with("HTTP/1.0 200"),
        "HTTP/1.0 needs no Host: {old}"
    );
    let twice = raw(
        server.addr,
        b"POST /api/books HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
          Transfer-Encoding: chunked\r\n\r\n5\r\ntitle\r\n0\r\n\r\n",
    )
    .await;
    assert!(twice.starts_with("HTTP/1.1 400"), "{twice}");
    assert!(twice.contains("chunked more than once"), "{twice}");
    // In one field hyper refuses it itself, closing without an answer.
    let in_one_field = raw(
        server.addr,
        b"POST /api/books HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n\
          5\r\ntitle\r\n0\r\n\r\n",
    )
    .await;
    assert!(
        in_one_field.is_empty() || in_one_field.starts_with("HTTP/1.1 400"),
        "{in_one_field}"
    );
    // RFC 9112 §2.2: a recipient MAY take a bare LF as a line end; hyper does, whole.
    let bare_lf = raw(server.addr, b"GET /api/ping HTTP/1.1\nHost: x\n\n").await;
    assert!(bare_lf.starts_with("HTTP/1.1 200"), "bare LF: {bare_lf}");
    let ping = raw(
        server.addr,
        b"GET /api/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(ping.starts_with("HTTP/1.1 200"), "{ping}");
    server.shutdown().await;
}
