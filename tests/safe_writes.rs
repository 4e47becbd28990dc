//! Safe writes through the server binary, across processes: 16 PUTs carrying one
//! `If-Match` tag, sent at once to two API processes on one database, give exactly one
//! 200 (SQLite and PostgreSQL); `--require-if-match true` answers 428 without one.

use std::net::SocketAddr;
use std::process::Stdio;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

mod common;

async fn start(database_url: &str, extra: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_books-api"))
        .args(["--listen", "127.0.0.1:0", "--database-url", database_url])
        .args(extra)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the server");
    let addr = common::listening(&mut child).await;
    (child, addr)
}

/// One request on a new connection: status, `ETag`, body.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Option<String>, String) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = sender.send_request(request).await.expect("an answer");
    let status = response.status().as_u16();
    let etag = response
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, etag, String::from_utf8_lossy(&body).into_owned())
}

/// Two processes on `database_url`; 16 PUTs of book 1 with its current tag, alternately
/// to each, all at once: exactly one 200, every other a 412, and the winner's title
/// stands.
async fn one_of_sixteen_wins(database_url: &str) {
    let (_a, a) = start(database_url, &[]).await;
    let (_b, b) = start(database_url, &[]).await;
    let (status, tag, book) = call(a, "GET", "/api/books/1?include=author", &[], "").await;
    assert_eq!(status, 200, "{book}");
    let tag = tag.expect("an ETag");
    let book: serde_json::Value = serde_json::from_str(&book).unwrap();
    let author = book["author"]["id"]
        .as_i64()
        .expect("the demo book has an author");
    let puts = (0..16).map(|n| {
        let (tag, addr) = (tag.clone(), if n % 2 == 0 { a } else { b });
        tokio::spawn(async move {
            let body = format!("title=Writer+{n}&author_id={author}&year=2020");
            let headers = [("if-match", tag.as_str())];
            let (status, _, body) =
                call(addr, "PUT", "/api/books/1?include=author", &headers, &body).await;
            (status, body)
        })
    });
    let mut won = Vec::new();
    for put in puts {
        let (status, body) = put.await.unwrap();
        match status {
            200 => won.push(serde_json::from_str::<serde_json::Value>(&body).unwrap()),
            412 => assert!(body.contains("Precondition failed"), "{body}"),
            other => panic!("200 or 412, not {other}: {body}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one PUT wins: {won:?}");
    let (_, _, now) = call(b, "GET", "/api/books/1", &[], "").await;
    let now: serde_json::Value = serde_json::from_str(&now).unwrap();
    assert_eq!(now["title"], won[0]["title"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_puts_across_processes_on_sqlite() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("safe-writes");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    one_of_sixteen_wins(&format!("sqlite://{}", path.display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_puts_across_processes_on_postgres() {
    let cluster = books_test_support::Cluster::start();
    let test = "conditional_puts_across_processes_on_postgres";
    if !books_test_support::required(&cluster, test, "a private PostgreSQL cluster") {
        return;
    }
    one_of_sixteen_wins(&cluster.unwrap().primary().url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_if_match_answers_428() {
    let (_server, addr) = start("memory", &["--require-if-match", "true"]).await;
    let (status, _, body) = call(addr, "DELETE", "/api/books/1", &[], "").await;
    assert_eq!(status, 428, "{body}");
    assert!(body.contains("Precondition required"));
    let (_, tag, _) = call(addr, "GET", "/api/books/1", &[], "").await;
    let tag = tag.unwrap();
    let (status, _, _) = call(addr, "DELETE", "/api/books/1", &[("if-match", &tag)], "").await;
    assert_eq!(status, 200);
}
