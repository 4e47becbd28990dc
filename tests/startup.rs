//! Starting the server beside a cluster in any state: a URL whose first host is down or
//! a standby starts on the host that takes writes (migrations and demo data there too),
//! a server with no such host waits for one within `--primary-wait` and otherwise exits
//! naming what each host was found to be, never a bare pool timeout. PostgreSQL from
//! `BOOKS_TEST_POSTGRES_URL` and MariaDB from `BOOKS_TEST_MYSQL_URL` (ignored without
//! them, except under `CI=true`); the fake servers of books-test-support need nothing.

use std::process::Stdio;
use std::time::{Duration, Instant};

use books_test_support::{Answer, FakeServer, Protocol, free_port};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

mod common;

/// The server on `url` (and `args`), stdout piped, stderr kept.
fn server(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_books-api"));
    command
        .args(["--listen", "127.0.0.1:0", "--database-url", url])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs `command` to its exit within `within`: the exit code and stderr.
async fn exit_of(mut command: Command, within: Duration) -> (Option<i32>, String) {
    let output = tokio::time::timeout(within, command.output())
        .await
        .expect("the server exits in time")
        .expect("the server ran");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// Starts `command` and waits for it to listen; a create through it must answer 201.
async fn starts_and_creates(command: &mut Command) -> Child {
    let mut child = command.spawn().expect("the server");
    let addr = common::listening(&mut child).await;
    let created = common::call(
        addr,
        "POST",
        "/api/books",
        &[("content-type", "application/x-www-form-urlencoded")],
        "title=Started&author_id=1&year=2024",
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.json());
    child
}

#[tokio::test]
async fn a_server_with_no_primary_exits_naming_each_host() {
    let standby = FakeServer::start(Protocol::Postgres, Answer::Standby);
    let down = free_port();
    let url = format!(
        "postgres://books@127.0.0.1:{down},{}/books",
        standby.address()
    );
    let started = Instant::now();
    let (code, stderr) = exit_of(
        server(&url, &["--primary-wait", "0"]),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "one search, not a pool timeout"
    );
    let first = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        first.starts_with("error: no server is read-write"),
        "{stderr}"
    );
    assert!(
        first.contains(&format!("127.0.0.1:{down} refused the connection")),
        "{stderr}"
    );
    assert!(
        first.contains(&format!("{}: a standby", standby.address())),
        "{stderr}"
    );
    assert!(!stderr.contains("pool timed out"), "{stderr}");

    // MariaDB alike, a login refused this time.
    let refusing = FakeServer::start(Protocol::MySql, Answer::BadPassword);
    let url = format!(
        "mysql://books@127.0.0.1:{down},{}/books",
        refusing.address()
    );
    let (code, stderr) = exit_of(
        server(&url, &["--primary-wait", "0"]),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{down} refused the connection")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{} refused the login: Access denied",
            refusing.address()
        )),
        "{stderr}"
    );
}

/// The server waits for a primary that is not there yet, within `--primary-wait`, and
/// gives up after it.
#[tokio::test]
async fn a_server_waits_for_its_primary_within_the_bound() {
    let standby = FakeServer::start(Protocol::Postgres, Answer::Standby);
    let url = format!("postgres://books@{}/books", standby.address());
    let started = Instant::now();
    let (code, stderr) = exit_of(
        server(&url, &["--primary-wait", "2"]),
        Duration::from_secs(20),
    )
    .await;
    let waited = started.elapsed();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(8),
        "waited {waited:?}"
    );
    assert!(
        standby.accepted() >= 4,
        "asked again while waiting: {}",
        standby.accepted()
    );
    assert!(stderr.contains("a standby"), "{stderr}");
}

/// A URL whose first host refuses and whose second is a standby starts on the third,
/// the database that takes writes; and a server whose only host comes up while it waits
/// starts then.
async fn starts_on_the_host_that_takes_writes(scheme: &str, real: &str, protocol: Protocol) {
    let (down, standby) = (free_port(), FakeServer::start(protocol, Answer::Standby));
    let (userinfo, rest) = real.split_once('@').expect("scheme://user@host:port/db");
    let (host, database) = rest.split_once('/').expect("a database");
    let url = format!(
        "{userinfo}@127.0.0.1:{down},{},{host}/{database}",
        standby.address()
    );
    let mut command = server(&url, &["--primary-wait", "0"]);
    drop(starts_and_creates(&mut command).await);

    // Nothing listens yet at the URL's one host: the server waits, and starts once a way
    // to the database opens there.
    let late = free_port();
    let url = format!(
        "{scheme}://{}@127.0.0.1:{late}/{database}",
        user_of(userinfo)
    );
    let mut command = server(&url, &["--primary-wait", "30"]);
    let host = host.to_owned();
    let opens = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        forward(late, host).await;
    });
    let child = starts_and_creates(&mut command).await;
    drop(child);
    opens.abort();
}

/// The user of a URL's `scheme://user` part.
fn user_of(userinfo: &str) -> &str {
    userinfo
        .rsplit_once("//")
        .map_or(userinfo, |(_, user)| user)
}

/// Forwards every connection to `port` on to `to`, until aborted.
async fn forward(port: u16, to: String) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the port");
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            return;
        };
        let to = to.clone();
        tokio::spawn(async move {
            if let Ok(mut server) = TcpStream::connect(&to).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
    }
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_starts_on_the_host_that_takes_writes() {
    let url = std::env::var("BOOKS_TEST_POSTGRES_URL").expect("a database");
    common::with_database(&url, "startup", async |url| {
        starts_on_the_host_that_takes_writes("postgres", &url, Protocol::Postgres).await
    })
    .await;
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_starts_on_the_host_that_takes_writes() {
    let url = std::env::var("BOOKS_TEST_MYSQL_URL").expect("a database");
    common::with_database(&url, "startup", async |url| {
        starts_on_the_host_that_takes_writes("mysql", &url, Protocol::MySql).await
    })
    .await;
}
