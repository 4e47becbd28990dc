//! PgBouncer (Debian's package) in transaction mode, as production runs it.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::{free_port, root, scratch, wait_for_port};

/// PgBouncer on a free port in transaction mode, in front of a server on `127.0.0.1`,
/// with the usual `ignore_startup_parameters = extra_float_digits` and nothing more (but
/// a one-second `server_login_retry`, so tests need not wait 15 s after a failed login);
/// stopped and removed when dropped.
#[derive(Debug)]
pub struct PgBouncer {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl PgBouncer {
    /// Starts PgBouncer in front of the server at `127.0.0.1:server_port` (every
    /// database, user `postgres` trusted); `None` if it is not installed or would not
    /// start.
    pub fn start(server_port: u16) -> Option<Self> {
        let dir = scratch("pgbouncer")?;
        let port = free_port();
        let config = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={server_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/userlist.txt\n\
             pool_mode = transaction\n\
             ignore_startup_parameters = extra_float_digits\n\
             max_client_conn = 1000\n\
             default_pool_size = 20\n\
             server_login_retry = 1\n\
             logfile = {dir}/pgbouncer.log\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("pgbouncer.ini"), config).ok()?;
        std::fs::write(dir.join("userlist.txt"), "\"postgres\" \"\"\n").ok()?;
        let mut bouncer = Self {
            dir,
            port,
            child: None,
        };
        bouncer.up().then_some(bouncer)
    }

    /// Leaves it running until this process ends, however it ends (a test binary's
    /// statics are never dropped): a watchdog process kills it then.
    pub fn until_exit(mut self) -> u16 {
        if let Some(child) = &self.child {
            let watch = format!(
                "while kill -0 {parent} 2>/dev/null; do sleep 0.5; done; kill -9 {child}; rm -rf '{dir}'",
                parent = std::process::id(),
                child = child.id(),
                dir = self.dir.display(),
            );
            let _ = std::process::Command::new("sh")
                .args(["-c", &watch])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
        }
        self.child = None;
        let port = self.port;
        std::mem::forget(self);
        port
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of `database` through it, as user `postgres`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Starts it (again) and waits until it accepts connections; whether it did.
    pub fn up(&mut self) -> bool {
        if self.child.is_some() {
            return true;
        }
        let program = PathBuf::from(if std::path::Path::new("/usr/sbin/pgbouncer").exists() {
            "/usr/sbin/pgbouncer"
        } else {
            "pgbouncer"
        });
        let mut command = std::process::Command::new(program);
        if root() {
            // PgBouncer refuses to run as root; `-u` drops to the user itself, so the
            // child is PgBouncer and a kill reaches it.
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(self.dir.join("pgbouncer.ini"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            return false;
        };
        self.child = Some(child);
        wait_for_port(self.port, Duration::from_secs(10))
    }

    /// Kills it: every client connection is cut, new ones are refused.
    pub fn down(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while wait_for_port(self.port, Duration::from_millis(50))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.down();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
