//! A PostgreSQL cluster of a test's own: a primary, and streaming replicas of it.

use std::path::PathBuf;
use std::time::Duration;

use crate::{free_port, psql, run_pg, scratch, wait_until};

/// One PostgreSQL server (a primary or a replica) in a scratch directory, on a free port.
#[derive(Debug)]
pub struct Node {
    dir: PathBuf,
    port: u16,
    /// Extra `-c name=value` settings it starts with.
    settings: Vec<String>,
}

/// A primary of a test's own; stopped and removed (with its replicas) when dropped.
#[derive(Debug)]
pub struct Cluster {
    primary: Node,
    replicas: Vec<Node>,
}

impl Node {
    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, as user `postgres`, database `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts it and waits until it accepts connections; whether it did.
    pub fn up(&self) -> bool {
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        for setting in &self.settings {
            options.push_str(&format!(" -c {setting}"));
        }
        run_pg(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "-s",
                "start",
            ],
        )
    }

    /// Stops it (fast: open connections are cut); whether it stopped.
    pub fn down(&self) -> bool {
        run_pg(
            "pg_ctl",
            &["-D", &self.data(), "-m", "fast", "-w", "-s", "stop"],
        )
    }

    /// Runs `sql` on it (`psql`, database `postgres`, within 30 s); its output (unaligned,
    /// tuples only, trimmed) if it succeeded.
    pub fn sql(&self, sql: &str) -> Option<String> {
        psql(&self.url(), sql, Duration::from_secs(30))
    }

    /// Stops it as a crash would (`pg_ctl stop -m immediate`: no shutdown checkpoint, open
    /// connections cut); whether it stopped. [`up`](Self::up) starts it again.
    pub fn crash(&self) -> bool {
        run_pg(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "-s", "stop"],
        )
    }

    /// Pauses a replica's replay (`pg_wal_replay_pause()`): it still receives WAL but its
    /// readers see nothing newer until [`resume_replay`](Self::resume_replay); whether it
    /// paused. A promotion ends the pause and replays what was received first, so this
    /// loses no commit in a failover (see [`detach`](Self::detach)).
    pub fn pause_replay(&self) -> bool {
        self.sql("SELECT pg_wal_replay_pause()").is_some()
    }

    /// Resumes the replay [`pause_replay`](Self::pause_replay) paused; whether it did.
    pub fn resume_replay(&self) -> bool {
        self.sql("SELECT pg_wal_replay_resume()").is_some()
    }

    /// Stops a replica receiving WAL from its primary (`primary_conninfo` emptied and
    /// reloaded), so that a commit the primary makes afterwards is lost if the replica is
    /// promoted; whether it did.
    pub fn detach(&self) -> bool {
        self.sql("ALTER SYSTEM SET primary_conninfo = ''").is_some()
            && self.sql("SELECT pg_reload_conf()").is_some()
            && wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
                self.sql("SELECT count(*) FROM pg_stat_wal_receiver")
                    .as_deref()
                    == Some("0")
            })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        run_pg(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-s", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cluster {
    /// A new primary (`initdb`, trust authentication, replication allowed from
    /// loopback), started; `None` if the tools are missing or it would not start.
    pub fn start() -> Option<Self> {
        let dir = scratch("pg")?;
        let primary = Node {
            port: free_port(),
            settings: vec![],
            dir,
        };
        let data = primary.data();
        let initialised = run_pg("initdb", &["-D", &data, "-A", "trust", "-U", "postgres"]);
        (initialised && primary.up()).then_some(Self {
            primary,
            replicas: vec![],
        })
    }

    /// The primary.
    pub fn primary(&self) -> &Node {
        &self.primary
    }

    /// Promotes replica `replica` (`pg_ctl promote`) and waits up to 60 s until it is out
    /// of recovery and takes writes; whether it did. It stays in [`replicas`](Self::replicas);
    /// the other replicas go on following the old primary (or nothing, once it is down).
    pub fn promote(&self, replica: usize) -> bool {
        let Some(node) = self.replicas.get(replica) else {
            return false;
        };
        let data = node.data();
        let promoted = run_pg("pg_ctl", &["-D", &data, "-w", "-t", "60", "-s", "promote"]);
        promoted
            && wait_until(Duration::from_secs(60), Duration::from_millis(50), || {
                node.sql("SELECT NOT pg_is_in_recovery() AND txid_current() > 0")
                    .as_deref()
                    == Some("t")
            })
    }

    /// The replicas added so far, in order.
    pub fn replicas(&self) -> &[Node] {
        &self.replicas
    }

    /// Adds a streaming replica of the primary (`pg_basebackup -R`) that applies each
    /// commit `delay` after the primary made it (`recovery_min_apply_delay`), started;
    /// `None` if it would not start.
    pub fn add_replica(&mut self, delay: Duration) -> Option<&Node> {
        let replica = Node {
            dir: scratch("pg-replica")?,
            port: free_port(),
            settings: vec![format!("recovery_min_apply_delay={}ms", delay.as_millis())],
        };
        let port = self.primary.port.to_string();
        let copied = run_pg(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &replica.data(),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            ],
        );
        if !(copied && replica.up()) {
            return None;
        }
        self.replicas.push(replica);
        self.replicas.last()
    }
}
