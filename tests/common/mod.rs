//! What the tests that run the server binary share (each test binary uses a part).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// Waits for a server started with its stdout piped to print "listening on
/// http://ADDR/…" and returns ADDR; the rest of stdout keeps being read, since a closed
/// pipe would fail the server's writes.
pub async fn listening(child: &mut Child) -> SocketAddr {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(stdout).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                return rest.split('/').next().map(str::to_owned);
            }
        }
        None
    })
    .await
    .expect("the server starts")
    .expect("a line: listening on http://ADDR/…");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    addr.parse().expect("an address")
}

/// The server binary on an ephemeral loopback port with `args`, logging errors only (or
/// what `BOOKS_TEST_SERVER_LOG` says, a `RUST_LOG` filter); killed when the child is dropped.
pub async fn server(args: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_books-api"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env(
            "RUST_LOG",
            std::env::var("BOOKS_TEST_SERVER_LOG").unwrap_or("error".into()),
        )
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the server");
    let addr = listening(&mut child).await;
    (child, addr)
}

/// An answer with its whole body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("ASCII"))
    }

    /// The body as JSON (a string value when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&self.body).into_owned())
        })
    }
}

/// One request on a new connection.
pub async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(body.to_owned()).unwrap();
    send(addr, request).await.expect("an answer")
}

/// `request` on a new connection to `addr`; `None` if the connection failed or was cut
/// before the whole answer came.
pub async fn send(addr: SocketAddr, request: Request<String>) -> Option<Answer> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(connection);
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key("host") {
        parts
            .headers
            .insert("host", addr.to_string().parse().unwrap());
    }
    let request = Request::from_parts(parts, Full::new(Bytes::from(body)));
    let response = sender.send_request(request).await.ok()?;
    let (parts, body) = response.into_parts();
    Some(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect().await.ok()?.to_bytes(),
    })
}

/// A fresh database named for `test` on the server at `url` (`postgres://…/db` or
/// `mysql://…/db`), its URL handed to `run`, dropped after.
pub async fn with_database(url: &str, test: &str, run: impl AsyncFnOnce(String)) {
    use books_sqlx::sqlx::{AssertSqlSafe, Connection, MySqlConnection, PgConnection};
    let database = format!("books_{test}_{}", std::process::id());
    let postgres = url.starts_with("postgres");
    let admin = async |sql: String| {
        let sql = AssertSqlSafe(sql);
        let done = if postgres {
            let mut conn = PgConnection::connect(url).await.expect("PostgreSQL");
            books_sqlx::sqlx::raw_sql(sql)
                .execute(&mut conn)
                .await
                .map(drop)
        } else {
            let mut conn = MySqlConnection::connect(url).await.expect("MariaDB");
            books_sqlx::sqlx::raw_sql(sql)
                .execute(&mut conn)
                .await
                .map(drop)
        };
        done.expect("an admin statement");
    };
    let force = if postgres { " WITH (FORCE)" } else { "" };
    admin(format!("DROP DATABASE IF EXISTS {database}{force}")).await;
    admin(format!("CREATE DATABASE {database}")).await;
    let (base, _) = url.rsplit_once('/').expect("scheme://…/database");
    run(format!("{base}/{database}")).await;
    admin(format!("DROP DATABASE IF EXISTS {database}{force}")).await;
}
