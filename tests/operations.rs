//! What an operator meets: readiness while PostgreSQL stops and starts again, metrics
//! scraped after real requests, request ids in answers and logs, load shedding, start-up
//! errors and the conventional `PORT` and `DATABASE_URL`. The real binary runs wherever
//! the process itself matters (logs, exit codes, environment).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use books_api::{Limits, Operations};
use books_core::Config;
use bytes::Bytes;
use http::Response;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStderr, Command};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_books-api");

/// Held by the tests that serve the API in this process: the metrics recorder is global,
/// so another in-process test's requests would land in the metrics test's counters.
static IN_PROCESS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sends one request on a new connection.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Response<Bytes> {
    let answer = common::call(addr, method, path, headers, "").await;
    let mut response = Response::new(answer.body);
    *response.status_mut() = http::StatusCode::from_u16(answer.status).unwrap();
    *response.headers_mut() = answer.headers;
    response
}

async fn status(addr: SocketAddr, path: &str) -> u16 {
    send(addr, "GET", path, &[]).await.status().as_u16()
}

/// Polls `path` until it answers `want`, for up to `within`.
async fn wait_for(addr: SocketAddr, path: &str, want: u16, within: Duration) {
    let started = Instant::now();
    loop {
        let got = status(addr, path).await;
        if got == want {
            return;
        }
        assert!(started.elapsed() < within, "{path} still {got}, not {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn scratch_sqlite() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("operations-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{}-{n}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    format!("sqlite://{}", path.display())
}

/// The binary with no `BOOKS_*`, `PORT` or `DATABASE_URL` from this environment.
fn binary() -> Command {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars() {
        if name.starts_with("BOOKS_") || name == "PORT" || name == "DATABASE_URL" {
            command.env_remove(name);
        }
    }
    command.kill_on_drop(true);
    command
}

/// Starts `command` and waits for its "listening on" line; stderr stays readable.
async fn spawn(mut command: Command) -> (Child, SocketAddr, BufReader<ChildStderr>) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let addr = common::listening(&mut child).await;
    let stderr = BufReader::new(child.stderr.take().unwrap());
    (child, addr, stderr)
}

/// One Prometheus sample: the value of the line for `name` whose labels include `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
        let rest = rest.strip_suffix('}')?;
        let all = labels
            .iter()
            .all(|(k, v)| rest.split(',').any(|pair| pair == format!("{k}=\"{v}\"")));
        (metric == name && all).then(|| value.parse().ok())?
    })
}

/// Requests counted by route template and status, never by raw path; store calls,
/// rejections, in-flight and pool gauges beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_template() {
    let _alone = IN_PROCESS.lock().await;
    let store = books_api::Store::open(&scratch_sqlite(), &Default::default())
        .await
        .unwrap();
    let pools = store.clone();
    let handle = books_api::install_metrics(move || pools.pools()).expect("the only recorder");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let api = store.api(Config::default().with_body_limit(16));
    let operations = Operations {
        metrics: Some(handle),
        ..Operations::default()
    };
    tokio::spawn(books_api::serve_with(
        listener,
        api,
        Limits::default(),
        operations,
        books_api::ClientPolicy::default(),
        std::future::pending(),
    ));
    for id in [1, 2, 3] {
        assert_eq!(status(addr, &format!("/api/books/{id}")).await, 404);
    }
    for _ in 0..2 {
        assert_eq!(status(addr, "/api/books?page=1").await, 200);
    }
    let delete = send(addr, "DELETE", "/api/books/delete/9", &[]).await;
    assert_eq!(delete.status(), 404);
    let stream = TcpStream::connect(addr).await.unwrap();
    let (_read, mut write) = stream.into_split();
    write
        .write_all(b"POST /api/books HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        .await
        .unwrap();
    // The 413 for the declared length lands in the counters before the next scrape.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Pool gauges are sampled every second from start: wait for a sample taken after
    // the reads above (the first may predate the readers' first connection).
    let readers = [("pool", "sqlite_readers"), ("state", "idle")];
    let started = Instant::now();
    let text = loop {
        let scraped = send(addr, "GET", "/metrics", &[]).await;
        assert_eq!(scraped.status(), 200);
        let text = String::from_utf8(scraped.body().to_vec()).unwrap();
        let sampled = sample(&text, "books_db_pool_connections", &readers);
        if sampled.is_some_and(|n| n >= 1.0) || started.elapsed() > Duration::from_secs(5) {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let requests = |method, route, status| {
        let labels = [("method", method), ("route", route), ("status", status)];
        sample(&text, "books_http_requests_total", &labels)
    };
    assert_eq!(requests("GET", "/books/{id}", "404"), Some(3.0), "{text}");
    assert_eq!(requests("GET", "/books", "200"), Some(2.0), "{text}");
    assert_eq!(requests("DELETE", "/books/delete/{id}", "404"), Some(1.0));
    assert_eq!(requests("POST", "/books", "413"), Some(1.0), "{text}");
    assert!(
        !text.contains("route=\"/books/1\""),
        "raw paths are never labels"
    );
    let durations = [("method", "GET"), ("route", "/books"), ("status", "200")];
    assert_eq!(
        sample(
            &text,
            "books_http_request_duration_seconds_count",
            &durations
        ),
        Some(2.0)
    );
    let get = [("operation", "get"), ("outcome", "ok")];
    assert_eq!(
        sample(&text, "books_store_operation_duration_seconds_count", &get),
        Some(3.0)
    );
    let list = [("operation", "list"), ("outcome", "ok")];
    assert_eq!(
        sample(&text, "books_store_operation_duration_seconds_count", &list),
        Some(1.0),
        "the second list is the cached answer"
    );
    let hits = [("outcome", "hit")];
    assert_eq!(sample(&text, "books_cache_lookups_total", &hits), Some(1.0));
    let misses = [("outcome", "miss")];
    assert_eq!(
        sample(&text, "books_cache_lookups_total", &misses),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            "books_http_rejections_total",
            &[("reason", "body_limit")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "books_http_requests_in_flight", &[]),
        Some(0.0)
    );
    assert!(sample(&text, "books_db_pool_connections", &readers).is_some_and(|n| n >= 1.0));
    let writer = [("pool", "sqlite_writer")];
    assert_eq!(
        sample(&text, "books_db_pool_max_connections", &writer),
        Some(1.0)
    );
}

/// `/readyz` turns 503 when PostgreSQL stops and 200 when it is back; `/livez` stays
/// 200 throughout; API reads get 503 with `Retry-After` meanwhile.
#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_postgres_down_and_up() {
    let cluster = books_test_support::Cluster::start();
    let cluster = books_test_support::started(cluster, "a private PostgreSQL cluster");
    let pg = cluster.primary();
    let mut command = binary();
    command.args(["--listen", "127.0.0.1:0", "--database-url", &pg.url()]);
    command
        .args(["--ready-timeout-ms", "1000"])
        .env("RUST_LOG", "warn");
    let (_server, addr, _) = spawn(command).await;
    assert_eq!(status(addr, "/readyz").await, 200);
    assert_eq!(status(addr, "/livez").await, 200);
    assert_eq!(status(addr, "/api/books").await, 200);

    assert!(pg.down(), "pg_ctl stop");
    wait_for(addr, "/readyz", 503, Duration::from_secs(10)).await;
    let ready = send(addr, "GET", "/readyz", &[]).await;
    assert_eq!(ready.headers()["retry-after"], "1");
    assert_eq!(status(addr, "/livez").await, 200);
    let list = send(addr, "GET", "/api/books", &[]).await;
    assert_eq!(list.status(), 503);
    assert_eq!(list.headers()["retry-after"], "1");

    assert!(pg.up(), "pg_ctl start");
    wait_for(addr, "/readyz", 200, Duration::from_secs(20)).await;
    assert_eq!(status(addr, "/api/books").await, 200);
}

/// The request id is in the answer, the problem body and the request's log lines (no
/// ANSI colours: stderr is a pipe here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_reach_the_logs() {
    let mut command = binary();
    command.args(["--listen", "127.0.0.1:0", "--database-url", "memory"]);
    // Per-request lines are DEBUG (off by default).
    command.env("RUST_LOG", "info,books_core=debug");
    let (_server, addr, stderr) = spawn(command).await;
    let reply = send(
        addr,
        "GET",
        "/api/books/999",
        &[("x-request-id", "trace-42")],
    )
    .await;
    assert_eq!(reply.status(), 404);
    assert_eq!(reply.headers()["x-request-id"], "trace-42");
    let problem: serde_json::Value = serde_json::from_slice(reply.body()).unwrap();
    assert_eq!(problem["instance"], "urn:request:trace-42");

    let mut lines = stderr.lines();
    let line = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("trace-42") {
                return line;
            }
        }
        panic!("the server's stderr ended");
    })
    .await
    .expect("a log line with the request id");
    for part in [
        "id=trace-42",
        "http.request.method=GET",
        "http.route=/api/books/{id}",
        "status=404",
        "latency_us=",
    ] {
        assert!(line.contains(part), "{part} in {line:?}");
    }
    assert!(
        !line.contains('\u{1b}'),
        "no ANSI colours into a pipe: {line:?}"
    );
}

/// Past `max_in_flight` the excess gets 503 + `Retry-After` at once, the operator
/// endpoints still answer, and requests are admitted again once one finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excess_requests_are_shed_at_once() {
    let _alone = IN_PROCESS.lock().await;
    let store = books_api::Store::open("memory", &Default::default())
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = Limits {
        max_in_flight: 1,
        ..Limits::default()
    };
    let api = store.api(Config::default());
    tokio::spawn(books_api::serve(
        listener,
        api,
        limits,
        std::future::pending(),
    ));

    // A write whose body trickles in holds the one place (unless a read held it when
    // the write arrived, and the write was shed: then it is sent again).
    let head = "POST /api/books HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                Content-Length: 2\r\n\r\n{";
    let (mut slow, shed) = 'attempts: {
        for _ in 0..5 {
            let mut slow = TcpStream::connect(addr).await.unwrap();
            slow.write_all(head.as_bytes()).await.unwrap();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(2) {
                let reply = send(addr, "GET", "/api/books", &[("x-request-id", "shed-1")]).await;
                if reply.status() == 503 {
                    break 'attempts (slow, reply);
                }
            }
        }
        panic!("no request was shed while a slow write held the one place");
    };
    assert_eq!(shed.status(), 503);
    assert_eq!(shed.headers()["retry-after"], "1");
    assert_eq!(shed.headers()["x-request-id"], "shed-1");
    assert_eq!(shed.headers()["cache-control"], "no-store");
    let problem: serde_json::Value = serde_json::from_slice(shed.body()).unwrap();
    assert_eq!(problem["status"], 503);
    assert_eq!(problem["instance"], "urn:request:shed-1");
    let ready = send(addr, "GET", "/readyz", &[("x-request-id", "probe-1")]).await;
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.headers()["x-request-id"], "probe-1");
    assert_eq!(status(addr, "/livez").await, 200);

    slow.write_all(b"}").await.unwrap();
    wait_for(addr, "/api/books", 200, Duration::from_secs(5)).await;
}

/// Start-up errors print the message and each cause on a line of its own and exit 1.
#[tokio::test]
async fn startup_errors_are_messages_not_debug_structs() {
    let output = binary()
        .args(["--listen", "127.0.0.1:0", "--database-url", "bogus://x"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr,
        "error: unsupported database URL \"bogus://x\" (expected sqlite:…, postgres://…, mysql://…, or memory)\n"
    );

    let missing = "sqlite:///nonexistent-directory/books.db?mode=rw";
    let output = binary()
        .args(["--listen", "127.0.0.1:0", "--database-url", missing])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<_> = stderr.lines().collect();
    assert_eq!(lines.first(), Some(&"error: database error"), "{stderr}");
    assert!(
        lines.len() >= 2 && lines[1].starts_with("  caused by: "),
        "{stderr}"
    );
    assert!(!stderr.contains("Database("), "{stderr}");
}

/// `DATABASE_URL` and `PORT` are fall-backs after the `BOOKS_*` variables.
#[tokio::test]
async fn database_url_and_port_are_fallbacks() {
    let output = binary()
        .args(["--listen", "127.0.0.1:0"])
        .env("DATABASE_URL", "bogus://from-database-url")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("bogus://from-database-url"), "{stderr}");

    let mut command = binary();
    command
        .env("DATABASE_URL", "bogus://from-database-url")
        .env("BOOKS_DATABASE_URL", "memory")
        .env("PORT", "0");
    let (_server, addr, _) = spawn(command).await;
    assert!(
        addr.ip().is_unspecified(),
        "PORT listens on all interfaces: {addr}"
    );
    let local = SocketAddr::from(([127, 0, 0, 1], addr.port()));
    assert_eq!(
        status(local, "/api/ping").await,
        200,
        "BOOKS_DATABASE_URL wins"
    );
}

/// `--metrics-listen` moves `/metrics` to an address of its own (any path answers there).
#[tokio::test]
async fn metrics_can_listen_apart() {
    let free = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = free.local_addr().unwrap();
    drop(free);
    let mut command = binary();
    command.args(["--listen", "127.0.0.1:0", "--database-url", "memory"]);
    command.args(["--metrics-listen", &metrics_addr.to_string()]);
    let (_server, addr, _) = spawn(command).await;
    assert_eq!(status(addr, "/api/ping").await, 200);
    assert_eq!(
        status(addr, "/metrics").await,
        404,
        "not on the API's address"
    );
    let scraped = send(metrics_addr, "GET", "/anything", &[]).await;
    assert_eq!(scraped.status(), 200);
    let text = String::from_utf8(scraped.body().to_vec()).unwrap();
    let ping = [("method", "GET"), ("route", "/ping"), ("status", "200")];
    assert_eq!(
        sample(&text, "books_http_requests_total", &ping),
        Some(1.0),
        "{text}"
    );
}

/// A log collector that went away (stderr closed) does not take requests down with it.
#[tokio::test]
async fn closed_stderr_does_not_break_requests() {
    let mut command = binary();
    command.args(["--listen", "127.0.0.1:0", "--database-url", "memory"]);
    // Per-request lines are DEBUG (off by default).
    command.env("RUST_LOG", "info,books_core=debug");
    let (_server, addr, stderr) = spawn(command).await;
    drop(stderr);
    for _ in 0..3 {
        assert_eq!(status(addr, "/api/books/1").await, 200);
    }
}
