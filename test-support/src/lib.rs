//! Fixtures the workspace's tests share: a PostgreSQL cluster of a test's own (a primary
//! and streaming replicas, `initdb`/`pg_basebackup`/`pg_ctl` from `pg_config --bindir`),
//! PgBouncer in transaction mode in front of any server, MariaDB servers of a test's own
//! (a primary and GTID replicas, `mariadb-install-db`/`mariadbd`), and free loopback
//! ports.
//!
//! Each fixture runs on free ports in a scratch directory and is stopped and removed
//! when dropped. PostgreSQL and PgBouncer refuse to run as root: as root, the tools run
//! as the `postgres` user. A fixture that cannot start returns `None`; [`started`] turns
//! that into the test's failure.

mod cluster;
mod mariadb;
mod pgbouncer;

pub use cluster::{Cluster, Node};
pub use mariadb::MariaDb;
pub use pgbouncer::PgBouncer;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback port nothing listens on (for now).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// The fixture a test needs, or a failure that names what could not start. Tests that
/// need a fixture run only where its tools are installed (or under `CI=true`): elsewhere
/// they show as ignored (see `books-sqlx/build.rs`), so a fixture that does not start
/// where they run is a failure.
pub fn started<T>(fixture: Option<T>, needs: &str) -> T {
    fixture.unwrap_or_else(|| panic!("{needs} did not start here"))
}

/// Waits up to `within` until `port` on loopback accepts connections.
pub fn wait_for_port(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether this process runs as root.
fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}

/// `program` as a command, run as the `postgres` user when we are root.
fn as_postgres(program: &Path) -> Command {
    if root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// A PostgreSQL tool from `pg_config --bindir`.
fn pg_tool(name: &str) -> PathBuf {
    let bindir = Command::new("pg_config").arg("--bindir").output();
    let bindir = bindir.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    Path::new(&bindir.unwrap_or_default()).join(name)
}

/// Runs a PostgreSQL tool to its end; whether it succeeded.
fn run_pg(name: &str, args: &[&str]) -> bool {
    as_postgres(&pg_tool(name))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A new scratch directory.
fn scratch_dir(kind: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "books-{kind}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// A new scratch directory that the `postgres` user owns.
fn scratch(kind: &str) -> Option<PathBuf> {
    let dir = scratch_dir(kind)?;
    if root() {
        Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir)
            .status()
            .ok()?;
    }
    Some(dir)
}
