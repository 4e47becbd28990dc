//! Crash durability of the example server: many clients write, the server is killed with
//! SIGKILL mid-stream, restarted on the same database, and every write it acknowledged
//! is there, with the book total still exact; and clients that retry each create with
//! its own `Idempotency-Key` until a 201, through several SIGKILLs, end with every
//! acknowledged key's book stored exactly once. SQLite, PostgreSQL from
//! `BOOKS_TEST_POSTGRES_URL` and MariaDB from `BOOKS_TEST_MYSQL_URL` (ignored without
//! them, except under `CI=true`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

mod common;

const WRITERS: usize = 16;

/// Starts the server on `database_url` and returns it with its address.
async fn start(database_url: &str) -> (Child, String) {
    start_on(database_url, "127.0.0.1:0").await
}

/// Starts the server on `database_url` listening on `listen`.
async fn start_on(database_url: &str, listen: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_books-api"))
        .args(["--listen", listen, "--database-url", database_url])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the server");
    let addr = common::listening(&mut child).await.to_string();
    (child, addr)
}

/// A keep-alive client connection.
struct Client {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: String,
}

impl Client {
    async fn connect(addr: &str) -> Option<Client> {
        let stream = TcpStream::connect(addr).await.ok()?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .ok()?;
        tokio::spawn(connection);
        Some(Client {
            sender,
            addr: addr.to_owned(),
        })
    }

    /// The answer within 10 s, or `None` (no connection, no answer).
    async fn send(&mut self, request: Request<Full<Bytes>>) -> Option<(StatusCode, Value)> {
        let answer = async {
            self.sender.ready().await.ok()?;
            let response = self.sender.send_request(request).await.ok()?;
            let status = response.status();
            let body = response.into_body().collect().await.ok()?.to_bytes();
            Some((status, serde_json::from_slice(&body).ok()?))
        };
        tokio::time::timeout(Duration::from_secs(10), answer)
            .await
            .ok()?
    }

    async fn get(&mut self, path: &str) -> (StatusCode, Value) {
        let request = Request::get(path)
            .header("host", &self.addr)
            .body(Full::default())
            .unwrap();
        self.send(request).await.expect("an answer")
    }
}

/// Writes from many clients until the server dies; returns every acknowledged book.
async fn write_until_killed(addr: &str, mut server: Child) -> Vec<(i64, String)> {
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (addr, acknowledged) = (addr.to_owned(), acknowledged.clone());
            tokio::spawn(async move {
                let Some(mut client) = Client::connect(&addr).await else {
                    return;
                };
                for n in 0.. {
                    let title = format!("crash {writer}-{n}");
                    let request = Request::post("/api/books")
                        .header("host", &addr)
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(Full::new(Bytes::from(format!(
                            "title={}&author_id=1&year=2020",
                            title.replace(' ', "+")
                        ))))
                        .unwrap();
                    let Some((status, body)) = client.send(request).await else {
                        return;
                    };
                    assert_eq!(status, StatusCode::CREATED, "{body}");
                    let id = body["id"].as_i64().expect("id");
                    acknowledged.lock().unwrap().push((id, title));
                }
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while acknowledged.lock().unwrap().len() < 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "200 creates not acknowledged within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill().await.expect("SIGKILL");
    for writer in writers {
        writer.await.expect("writer");
    }
    Arc::try_unwrap(acknowledged).unwrap().into_inner().unwrap()
}

/// Kills the server mid-stream, restarts it on the same database, and checks every
/// acknowledged write and the total.
async fn survives_sigkill(database_url: &str) {
    let (server, addr) = start(database_url).await;
    let acknowledged = write_until_killed(&addr, server).await;
    let (_restarted, addr) = start(database_url).await;
    let mut client = Client::connect(&addr).await.expect("restarted server");
    for (id, title) in &acknowledged {
        let (status, book) = client.get(&format!("/api/books/{id}")).await;
        assert_eq!(status, StatusCode::OK, "acknowledged book {id} lost");
        assert_eq!(book["title"], title.as_str());
    }
    let (_, first) = client.get("/api/books").await;
    let total = first["meta"]["total"].as_u64().expect("total");
    let mut listed = 0;
    for page in 1.. {
        let (_, body) = client.get(&format!("/api/books?page={page}")).await;
        let books = body["data"].as_array().expect("data").len();
        if books == 0 {
            break;
        }
        listed += books as u64;
    }
    assert_eq!(total, listed, "the counter matches the rows");
    assert!(total >= 45 + acknowledged.len() as u64);
    eprintln!(
        "{database_url}: {} acknowledged writes kept, total {total}",
        acknowledged.len()
    );
}

/// Keys acknowledged by clients that retry each keyed create until a 201 (whatever
/// happened: no connection, a cut connection, a 5xx, a 409), until `stop`.
async fn keyed_writer(addr: String, writer: usize, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut acknowledged = Vec::new();
    let mut client: Option<Client> = None;
    for n in 0.. {
        let key = format!("w{writer}-k{n}");
        loop {
            if client.is_none() {
                client = Client::connect(&addr).await;
            }
            if let Some(connected) = client.as_mut() {
                let request = Request::post("/api/books")
                    .header("host", &addr)
                    .header("idempotency-key", &key)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(Full::new(Bytes::from(format!(
                        "title=keyed+{key}&author_id=1&year=2020"
                    ))))
                    .unwrap();
                match connected.send(request).await {
                    Some((StatusCode::CREATED, body)) => {
                        assert_eq!(body["title"], format!("keyed {key}"));
                        acknowledged.push(key);
                        break;
                    }
                    Some((status, _)) => assert!(
                        status == StatusCode::CONFLICT || status.is_server_error(),
                        "only a 409 or a 5xx is worth a retry: {status}"
                    ),
                    None => client = None,
                }
            }
            // A key never answered once the load stops is no claim: the check looks
            // only at acknowledged ones.
            if stop.load(Ordering::Relaxed) {
                return acknowledged;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if stop.load(Ordering::Relaxed) {
            return acknowledged;
        }
    }
    unreachable!()
}

/// The server SIGKILLed three times under keyed creates that are retried until a 201,
/// restarted on the same database and port: every acknowledged key's book is there
/// exactly once, and no key made two books.
async fn keyed_creates_survive_sigkills(database_url: &str) {
    let listen = format!(
        "127.0.0.1:{}",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let (mut server, addr) = start_on(database_url, &listen).await;
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (addr, stop, count) = (addr.clone(), stop.clone(), acknowledged.clone());
            tokio::spawn(async move {
                let keys = keyed_writer(addr, writer, stop).await;
                *count.lock().unwrap() += keys.len();
                keys
            })
        })
        .collect();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.kill().await.expect("SIGKILL");
        tokio::time::sleep(Duration::from_millis(100)).await;
        server = start_on(database_url, &listen).await.0;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    let mut keys = Vec::new();
    for writer in writers {
        // A request the last server never answers is one no client would wait for.
        let done = tokio::time::timeout(Duration::from_secs(30), writer).await;
        keys.extend(
            done.expect("each writer stops within 30 s")
                .expect("writer"),
        );
    }
    assert!(keys.len() > 100, "{} keys acknowledged", keys.len());

    let mut client = Client::connect(&addr).await.expect("the last server");
    let mut stored: std::collections::HashMap<String, usize> = Default::default();
    for page in 1.. {
        let (_, body) = client.get(&format!("/api/books?page={page}")).await;
        let books = body["data"].as_array().expect("data");
        if books.is_empty() {
            break;
        }
        for book in books {
            if let Some(key) = book["title"]
                .as_str()
                .and_then(|t| t.strip_prefix("keyed "))
            {
                *stored.entry(key.to_owned()).or_default() += 1;
            }
        }
    }
    let twice: Vec<_> = stored.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "keys stored twice: {twice:?}");
    for key in &keys {
        assert_eq!(
            stored.get(key),
            Some(&1),
            "acknowledged key {key} stored once"
        );
    }
    eprintln!(
        "{database_url}: {} acknowledged keys each stored once ({} keys in all)",
        keys.len(),
        stored.len()
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_every_acknowledged_write() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crash-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    survives_sigkill(&format!("sqlite://{}", path.display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_stores_every_acknowledged_key_once() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crash-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("keyed-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    keyed_creates_survive_sigkills(&format!("sqlite://{}", path.display())).await;
}

/// A fresh database of the server at `BOOKS_TEST_POSTGRES_URL` for `test`.
async fn with_postgres_database(test: &str, run: impl AsyncFnOnce(String)) {
    let url = std::env::var("BOOKS_TEST_POSTGRES_URL").expect("run only with a database");
    common::with_database(&url, test, run).await;
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stores_every_acknowledged_key_once() {
    with_postgres_database("keyed", async |url| {
        keyed_creates_survive_sigkills(&url).await
    })
    .await;
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_every_acknowledged_write() {
    with_postgres_database("crash", async |url| survives_sigkill(&url).await).await;
}

/// A fresh database of the server at `BOOKS_TEST_MYSQL_URL` for `test`.
async fn with_mysql_database(test: &str, run: impl AsyncFnOnce(String)) {
    let url = std::env::var("BOOKS_TEST_MYSQL_URL").expect("run only with a database");
    common::with_database(&url, test, run).await;
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_stores_every_acknowledged_key_once() {
    with_mysql_database("keyed", async |url| {
        keyed_creates_survive_sigkills(&url).await
    })
    .await;
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_keeps_every_acknowledged_write() {
    with_mysql_database("crash", async |url| survives_sigkill(&url).await).await;
}
