//! Safe writes through the server binary, across processes: 16 PUTs carrying one
//! `If-Match` tag, sent at once to two API processes on one database, give exactly one
//! 200 (SQLite, PostgreSQL and MariaDB); `--require-if-match true` answers 428 without
//! one.

mod common;

use common::{call, server};

/// Two processes on `database_url`; 16 PUTs of book 1 with its current tag, alternately
/// to each, all at once: exactly one 200, every other a 412, and the winner's title
/// stands.
async fn one_of_sixteen_wins(database_url: &str) {
    let (_a, a) = server(&["--database-url", database_url]).await;
    let (_b, b) = server(&["--database-url", database_url]).await;
    let got = call(a, "GET", "/api/books/1?include=author", &[], "").await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    let tag = got.header("etag").expect("an ETag").to_owned();
    let book = got.json();
    let author = book["author"]["id"]
        .as_i64()
        .expect("the demo book has an author");
    let puts = (0..16).map(|n| {
        let (tag, addr) = (tag.clone(), if n % 2 == 0 { a } else { b });
        tokio::spawn(async move {
            let body = format!("title=Writer+{n}&author_id={author}&year=2020");
            let headers = [("if-match", tag.as_str())];
            let put = call(addr, "PUT", "/api/books/1?include=author", &headers, &body).await;
            (put.status, put.json())
        })
    });
    let mut won = Vec::new();
    for put in puts {
        let (status, body) = put.await.unwrap();
        match status {
            200 => won.push(body),
            412 => assert_eq!(body["detail"], "Precondition failed"),
            other => panic!("200 or 412, not {other}: {body}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one PUT wins: {won:?}");
    let now = call(b, "GET", "/api/books/1", &[], "").await.json();
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

#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "needs PostgreSQL's server tools (initdb)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_puts_across_processes_on_postgres() {
    let cluster = books_test_support::Cluster::start();
    let cluster = books_test_support::started(cluster, "a private PostgreSQL cluster");
    one_of_sixteen_wins(&cluster.primary().url()).await;
}

#[cfg_attr(
    not(books_test_mariadb_servers),
    ignore = "needs MariaDB's server tools (mariadbd, mariadb-install-db)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_puts_across_processes_on_mariadb() {
    let server = books_test_support::MariaDb::primary();
    let server = books_test_support::started(server, "a private MariaDB server");
    assert!(server.sql("CREATE DATABASE books"));
    one_of_sixteen_wins(&server.url("books")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_if_match_answers_428() {
    let args = ["--database-url", "memory", "--require-if-match", "true"];
    let (_server, addr) = server(&args).await;
    let refused = call(addr, "DELETE", "/api/books/1", &[], "").await;
    assert_eq!(refused.status, 428, "{:?}", refused.body);
    assert_eq!(refused.json()["detail"], "Precondition required");
    let got = call(addr, "GET", "/api/books/1", &[], "").await;
    let tag = got.header("etag").unwrap().to_owned();
    let deleted = call(addr, "DELETE", "/api/books/1", &[("if-match", &tag)], "").await;
    assert_eq!(deleted.status, 200);
}
