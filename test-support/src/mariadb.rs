//! MariaDB servers of a test's own: a primary with its binary log (GTID positions), and
//! replicas of it that apply each transaction a set delay late.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, scratch_dir, wait_for_port};

/// One `mariadbd` in a scratch directory on a free port (127.0.0.1, user `root` without a
/// password); stopped and removed when dropped.
#[derive(Debug)]
pub struct MariaDb {
    dir: PathBuf,
    port: u16,
    server_id: u32,
    /// Its own binary log: a primary's.
    binlog: bool,
    child: Option<Child>,
}

impl MariaDb {
    /// A new primary (`mariadb-install-db`, the binary log on), started; `None` if the
    /// tools are missing or it would not start.
    pub fn primary() -> Option<Self> {
        Self::started(1, true)
    }

    /// A new server, started; tried three times (a free port may be taken by another
    /// test's server before this one binds it).
    fn started(server_id: u32, binlog: bool) -> Option<Self> {
        (0..3).find_map(|_| {
            let mut server = Self::install(server_id, binlog)?;
            server.up().then_some(server)
        })
    }

    /// A new replica of `primary` that applies each transaction `delay` after the
    /// primary committed it (`MASTER_DELAY`, whole seconds), replicating by GTID from
    /// the primary's first transaction, started; `None` if it would not start.
    pub fn replica_of(primary: &MariaDb, delay: Duration) -> Option<Self> {
        let server = Self::started(primary.server_id + 1 + primary.port as u32, false)?;
        let attach = format!(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, \
             MASTER_USER = 'root', MASTER_USE_GTID = slave_pos, MASTER_DELAY = {}; \
             START SLAVE",
            primary.port,
            delay.as_secs_f64().ceil() as u64
        );
        // Under load the server may take a moment to take statements after it listens.
        let attached = (0..50).any(|_| {
            server.sql(&attach) || {
                std::thread::sleep(Duration::from_millis(100));
                false
            }
        });
        attached.then_some(server)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, as user `root`, for `database`.
    pub fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs `sql` with the `mariadb` client; whether it succeeded.
    pub fn sql(&self, sql: &str) -> bool {
        Command::new("mariadb")
            .args(["--no-defaults", "-uroot", "-h127.0.0.1"])
            .arg(format!("-P{}", self.port))
            .args(["-e", sql])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Runs `sql` with the `mariadb` client (batch mode, no column names, within 30 s);
    /// its output (trimmed) if it succeeded.
    pub fn query(&self, sql: &str) -> Option<String> {
        let mut client = Command::new("mariadb");
        client
            .args(["--no-defaults", "-uroot", "-h127.0.0.1", "-BN"])
            .arg(format!("-P{}", self.port))
            .args(["-e", sql]);
        crate::output_within(&mut client, Duration::from_secs(30)).map(|out| out.trim().to_owned())
    }

    /// Makes a replica a primary of its own: it stops replicating and forgets its primary
    /// (`STOP SLAVE; RESET SLAVE ALL`) and takes writes (`read_only` off); whether it did.
    pub fn promote(&self) -> bool {
        self.sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF")
    }

    /// Stops a replica replicating (`STOP SLAVE`): what its primary commits afterwards it
    /// never gets, and is lost if it is then [promoted](Self::promote); whether it did.
    pub fn stop_replication(&self) -> bool {
        self.sql("STOP SLAVE")
    }

    /// Starts it and waits until it accepts connections; whether it did.
    pub fn up(&mut self) -> bool {
        let mut command = Command::new(mariadbd());
        command
            .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1"])
            .args(["--skip-name-resolve", "--innodb-buffer-pool-size=32M"])
            .arg(format!("--port={}", self.port))
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .arg(format!("--pid-file={}", self.dir.join("pid").display()))
            .arg(format!(
                "--log-error={}",
                self.dir.join("error.log").display()
            ))
            .arg(format!("--server-id={}", self.server_id))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.binlog {
            command.arg(format!("--log-bin={}", self.dir.join("binlog").display()));
        }
        match command.spawn() {
            Ok(child) => self.child = Some(child),
            Err(_) => return false,
        }
        let listening = wait_for_port(self.port, Duration::from_secs(60));
        // Not ours if it exited (its port taken): whatever listens there is another's.
        let exited = self
            .child
            .as_mut()
            .is_some_and(|child| !matches!(child.try_wait(), Ok(None)));
        listening && !exited
    }

    /// Stops it at once (`SIGKILL`: open connections are cut, nothing is flushed that
    /// InnoDB does not recover); whether it was running.
    pub fn down(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = child.kill();
        child.wait().is_ok()
    }

    fn install(server_id: u32, binlog: bool) -> Option<Self> {
        let dir = scratch_dir("mariadb")?;
        let installed = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg("--auth-root-authentication-method=normal")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        installed.then_some(Self {
            dir,
            port: free_port(),
            server_id,
            binlog,
            child: None,
        })
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.down();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `mariadbd`, on the `PATH` or where Debian puts it.
fn mariadbd() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("mariadbd"))
            .find(|candidate| candidate.exists())
    });
    on_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/mariadbd"))
}
