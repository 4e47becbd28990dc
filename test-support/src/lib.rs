//! Fixtures the workspace's tests share: a PostgreSQL cluster of a test's own (a primary
//! and streaming replicas, `initdb`/`pg_basebackup`/`pg_ctl` from `pg_config --bindir`),
//! PgBouncer in transaction mode in front of any server, MariaDB servers of a test's own
//! (a primary and GTID replicas, `mariadb-install-db`/`mariadbd`), a pg_auto_failover
//! formation (`pg_autoctl`: a monitor, a primary and a standby), a MariaDB Galera cluster,
//! and free loopback ports.
//!
//! Each fixture runs on free ports in a scratch directory and is stopped and removed
//! when dropped. PostgreSQL and PgBouncer refuse to run as root: as root, the tools run
//! as the `postgres` user. A fixture that cannot start returns `None`; [`started`] turns
//! that into the test's failure.

mod cluster;
mod fake_server;
mod galera;
pub mod history;
mod mariadb;
mod partition;
mod pg_auto_failover;
mod pg_processes;
mod pgbouncer;

pub use cluster::{Cluster, Node};
pub use fake_server::{Answer, FakeServer, Protocol};
pub use galera::Galera;
pub use mariadb::MariaDb;
pub use partition::{Cut, Partition};
pub use pg_auto_failover::PgAutoFailover;
pub use pgbouncer::PgBouncer;

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A port nothing listens on (for now), on any address, and another at each call in this
/// process. It is below Linux's ephemeral ports (32768–60999): the kernel gives those to
/// connections' own ends, and one did take a Galera node's port between this choice and
/// the node's bind (the node's IST listener: "Address already in use").
pub fn free_port() -> u16 {
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Test processes that run at once start from ports of their own.
    let start = std::process::id().wrapping_mul(7_919) % COUNT;
    for _ in 0..COUNT {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(FIRST + (start + n) % COUNT).expect("below 32,000");
        if TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port from {FIRST}")
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

/// Whether [`PgAutoFailover`] can run here: `pg_autoctl` on the `PATH`, and the
/// `pgautofailover` extension and `pg_ctl` where `pg_config` says PostgreSQL's are.
pub fn have_pg_auto_failover() -> bool {
    let sharedir = Command::new("pg_config").arg("--sharedir").output();
    let sharedir = sharedir.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    on_path("pg_autoctl").is_some()
        && pg_tool("pg_ctl").exists()
        && Path::new(&sharedir.unwrap_or_default())
            .join("extension/pgautofailover.control")
            .exists()
}

/// Whether [`Galera`] can run here: `mariadbd`, `mariadb-install-db`, the Galera 4
/// provider, and the rsync state transfer (`rsync`, `wsrep_sst_rsync`).
pub fn have_galera() -> bool {
    (on_path("mariadbd").is_some() || Path::new("/usr/sbin/mariadbd").exists())
        && galera::provider().is_some()
        && ["mariadb-install-db", "mariadb", "rsync", "wsrep_sst_rsync"]
            .iter()
            .all(|program| on_path(program).is_some())
}

/// `program` where the `PATH` has it.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.exists())
}

/// Runs `command` (in a process group of its own) to its end, killed with its group if it
/// has not ended within `within`; its standard output if it succeeded.
fn output_within(command: &mut Command, within: Duration) -> Option<String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + within;
    let status = loop {
        match child.try_wait() {
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(Some(status)) => break Some(status),
            _ => {
                signal_group(child.id(), "KILL");
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = reader.join().ok()?;
    status.is_some_and(|s| s.success()).then_some(out)
}

/// Sends `signal` (`KILL`, `QUIT`, `STOP`, ...) to every process of the group `group`.
fn signal_group(group: u32, signal: &str) {
    signal_process(&format!("-{group}"), signal);
}

/// Sends `signal` to the process `pid` (or, as `-group`, to a process group).
fn signal_process(pid: &str, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .args(["--", pid])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Calls `done` every `every` until it holds or `within` has passed; whether it held.
fn wait_until(within: Duration, every: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// The time left until `deadline` (none once it has passed).
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Runs `sql` at `url` with `psql` within `within`; its output (unaligned, tuples only,
/// trimmed) if it succeeded.
fn psql(url: &str, sql: &str, within: Duration) -> Option<String> {
    let mut command = Command::new(pg_tool("psql"));
    command.env("PGCONNECT_TIMEOUT", "3");
    command.args(["-XAtq", "--set=ON_ERROR_STOP=1", "-d", url, "-c", sql]);
    output_within(&mut command, within).map(|out| out.trim().to_owned())
}
