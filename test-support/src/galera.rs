//! A MariaDB Galera cluster of a test's own (`mariadbd` with the Galera 4 provider): every
//! node a writer, each on free loopback ports (MySQL, group communication, IST, SST),
//! joiners copied from a member by rsync (SST) or sent what they missed (IST).
//!
//! Each node runs with `--no-defaults`, `binlog_format=ROW`, `innodb_autoinc_lock_mode=2`
//! (as Galera requires), `innodb_flush_log_at_trx_commit=2` (a commit is durable on the
//! other nodes, not on this node's disk: Galera's own advice), a 32 MB buffer pool and a
//! 16 MB gcache. Galera's `wsrep_auto_increment_control` is left on: each node hands out
//! `AUTO_INCREMENT` ids in steps of the cluster's size (1, 4, 7, ... on a node of three).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, left, on_path, output_within, root, scratch_dir, wait_until};

/// One `mariadbd` of the cluster and its ports (MySQL on 127.0.0.1, the cluster's own on
/// the node's address: [`gcomm_address`]).
#[derive(Debug)]
struct Member {
    port: u16,
    galera_port: u16,
    ist_port: u16,
    sst_port: u16,
    child: Option<Child>,
}

/// A Galera cluster of a test's own: `n` `mariadbd` nodes on free loopback ports, user
/// `root` without a password over TCP, database `test`; killed and removed when dropped.
#[derive(Debug)]
pub struct Galera {
    dir: PathBuf,
    members: Vec<Member>,
}

impl Galera {
    /// A new cluster of `nodes` nodes, started: the first bootstraps it
    /// (`--wsrep-new-cluster`), the others join by SST (rsync); `None` if the tools are
    /// missing or not every node was `Synced` in a cluster of `nodes` within 120 s. A
    /// start that fails early is tried once more on other ports: a loopback port found
    /// free may be taken by another process before its node binds it.
    pub fn start(nodes: usize) -> Option<Self> {
        if !crate::have_galera() || nodes == 0 {
            return None;
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        Self::try_start(nodes, deadline).or_else(|| {
            let halfway = deadline - Duration::from_secs(60);
            (Instant::now() < halfway).then(|| Self::try_start(nodes, deadline))?
        })
    }

    /// One try of [`start`](Self::start), by `deadline`.
    fn try_start(nodes: usize, deadline: Instant) -> Option<Self> {
        let dir = scratch_dir("galera")?;
        let members = (0..nodes).map(|_| Member {
            port: free_port(),
            galera_port: free_port(),
            ist_port: free_port(),
            sst_port: free_port(),
            child: None,
        });
        let mut cluster = Self {
            members: members.collect(),
            dir,
        };
        for index in 0..nodes {
            std::fs::create_dir_all(cluster.data(index)).ok()?;
        }
        let mut install = Command::new("mariadb-install-db");
        install
            .args([
                "--no-defaults",
                "--skip-test-db",
                "--innodb-log-file-size=16M",
            ])
            .arg("--auth-root-authentication-method=normal")
            .arg(format!("--datadir={}", cluster.data(0).display()))
            .args(user());
        // As root, the nodes run as `mysql`: the rsync SST daemon a root joiner runs would
        // write as `nobody`, which cannot.
        let owned = !root()
            || Command::new("chown")
                .args(["-R", "mysql:mysql"])
                .arg(&cluster.dir)
                .status()
                .is_ok_and(|s| s.success());
        let installed = output_within(&mut install, Duration::from_secs(60)).is_some();
        if !(owned && installed) {
            return cluster.failed("mariadb-install-db failed");
        }
        if !cluster.spawn(0, true) {
            return cluster.failed("the first node did not listen");
        }
        let bootstrapped = cluster.wait_synced(0, left(deadline))
            && cluster
                .sql(0, "CREATE DATABASE IF NOT EXISTS test")
                .is_some();
        if !bootstrapped {
            return cluster.failed("the first node did not bootstrap");
        }
        if let Some(index) = (1..nodes).find(|&index| !cluster.spawn(index, false)) {
            return cluster.failed(&format!("node {index} did not listen"));
        }
        match (0..nodes).find(|&index| !cluster.wait_synced(index, left(deadline))) {
            Some(index) => cluster.failed(&format!("node {index} was not synced in time")),
            None => Some(cluster),
        }
    }

    /// Says on stderr why a start failed, with the end of each node's error log (the
    /// scratch directory goes with the cluster); `None`.
    fn failed(self, why: &str) -> Option<Self> {
        eprintln!("Galera: a start failed: {why}");
        for index in 0..self.members.len() {
            let log = self.dir.join(format!("node{index}.log"));
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(30)..];
            eprintln!("--- node {index}, the end of {}:", log.display());
            tail.iter().for_each(|line| eprintln!("{line}"));
        }
        None
    }

    /// The URL of `database` on every node, as user `root`
    /// (`mysql://root@127.0.0.1:P1,127.0.0.1:P2,.../database`).
    pub fn url(&self, database: &str) -> String {
        let hosts: Vec<String> = self
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("mysql://root@{}/{database}", hosts.join(","))
    }

    /// The URL of `database` on node `index` alone, as user `root`.
    pub fn node_url(&self, index: usize, database: &str) -> String {
        format!(
            "mysql://root@127.0.0.1:{}/{database}",
            self.members[index].port
        )
    }

    /// Node `index`'s own loopback address for the cluster's traffic (group
    /// communication, state transfers; its MySQL port is on 127.0.0.1): a
    /// [`Cut::between`](crate::Cut::between) two nodes' addresses splits the cluster.
    pub fn node_address(&self, index: usize) -> String {
        gcomm_address(index)
    }

    /// The nodes' MySQL ports (127.0.0.1), in order.
    pub fn ports(&self) -> Vec<u16> {
        self.members.iter().map(|member| member.port).collect()
    }

    /// Runs `sql` on node `index` (the `mariadb` client, batch mode without column names,
    /// within 30 s); its output (trimmed) if it succeeded.
    pub fn sql(&self, index: usize, sql: &str) -> Option<String> {
        let mut client = Command::new("mariadb");
        client
            .args([
                "--no-defaults",
                "-uroot",
                "-h127.0.0.1",
                "--connect-timeout=3",
            ])
            .arg(format!("-P{}", self.members[index].port))
            .args(["--batch", "--skip-column-names", "-e", sql]);
        output_within(&mut client, Duration::from_secs(30)).map(|out| out.trim().to_owned())
    }

    /// The value of the global status variable `name` (`wsrep_cluster_size`, ...) on node
    /// `index`, if it answered.
    pub fn status(&self, index: usize, name: &str) -> Option<String> {
        let row = self.sql(index, &format!("SHOW GLOBAL STATUS LIKE '{name}'"))?;
        Some(row.split_once('\t')?.1.to_owned())
    }

    /// Waits up to `within` until node `index` is `Synced` (`wsrep_local_state_comment`),
    /// ready, and in the primary component as big as the nodes running; whether it was.
    pub fn wait_synced(&self, index: usize, within: Duration) -> bool {
        let running = self
            .members
            .iter()
            .filter(|member| member.child.is_some())
            .count();
        let query = "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME) \
                     FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN \
                     ('wsrep_cluster_size', 'wsrep_cluster_status', \
                     'wsrep_local_state_comment', 'wsrep_ready')";
        let expected = format!("{running},Primary,Synced,ON");
        wait_until(within, Duration::from_millis(200), || {
            self.sql(index, query).as_deref() == Some(expected.as_str())
        })
    }

    /// Kills node `index` (`SIGKILL`): the others go on without it once they have noticed
    /// (Galera's `evs.suspect_timeout`, 5 s); whether it was running.
    pub fn kill(&mut self, index: usize) -> bool {
        let Some(mut child) = self.members[index].child.take() else {
            return false;
        };
        let _ = child.kill();
        child.wait().is_ok()
    }

    /// Starts killed node `index` again: it rejoins (IST from a member's gcache, or SST),
    /// and this waits up to 60 s until it is `Synced`; whether it was.
    pub fn restart(&mut self, index: usize) -> bool {
        if self.members[index].child.is_none() && !self.spawn(index, false) {
            return false;
        }
        self.wait_synced(index, Duration::from_secs(60))
    }

    fn data(&self, index: usize) -> PathBuf {
        self.dir.join(format!("node{index}"))
    }

    /// Spawns node `index`'s `mariadbd` (bootstrapping a new cluster if `bootstrap`);
    /// whether it is still running once it listens, within 60 s.
    fn spawn(&mut self, index: usize, bootstrap: bool) -> bool {
        let member = &self.members[index];
        let node = self.dir.join(format!("node{index}"));
        let peers: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("{}:{}", gcomm_address(i), m.galera_port))
            .collect();
        let mut command = Command::new(mariadbd());
        command
            .args([
                "--no-defaults",
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
            ])
            .args(user())
            .args([
                "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=16M",
            ])
            .args(["--binlog-format=ROW", "--innodb-autoinc-lock-mode=2"])
            .arg("--innodb-flush-log-at-trx-commit=2")
            .arg(format!("--port={}", member.port))
            .arg(format!("--datadir={}", self.data(index).display()))
            .arg(format!(
                "--socket={}",
                node.with_extension("sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                node.with_extension("pid").display()
            ))
            .arg(format!(
                "--log-error={}",
                node.with_extension("log").display()
            ))
            .arg(format!("--server-id={}", index + 1))
            .arg("--wsrep-on=ON")
            .arg(format!(
                "--wsrep-provider={}",
                provider().unwrap_or_default().display()
            ))
            .arg("--wsrep-cluster-name=books-test")
            .arg(format!(
                "--wsrep-cluster-address=gcomm://{}",
                peers.join(",")
            ))
            .arg(format!("--wsrep-node-name=node{index}"))
            .arg(format!(
                "--wsrep-node-address={}:{}",
                gcomm_address(index),
                member.galera_port
            ))
            .arg(format!(
                "--wsrep-node-incoming-address=127.0.0.1:{}",
                member.port
            ))
            .arg("--wsrep-sst-method=rsync")
            .arg(format!(
                "--wsrep-sst-receive-address={}:{}",
                gcomm_address(index),
                member.sst_port
            ))
            .arg(format!(
                "--wsrep-provider-options=gmcast.listen_addr=tcp://{address}:{};\
                 ist.recv_addr={address}:{};gcache.size=16M",
                member.galera_port,
                member.ist_port,
                address = gcomm_address(index)
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if bootstrap {
            command.arg("--wsrep-new-cluster");
        }
        let Ok(child) = command.spawn() else {
            return false;
        };
        let port = member.port;
        let member = &mut self.members[index];
        member.child = Some(child);
        let listening = crate::wait_for_port(port, Duration::from_secs(60));
        // Not ours if it exited (a port taken): whatever listens there is another's.
        let running = member
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        listening && running
    }
}

impl Drop for Galera {
    fn drop(&mut self) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Node `index`'s loopback address for the cluster's own traffic (group communication,
/// state transfers): one of its own, so a test can cut one node off from the others.
pub(crate) fn gcomm_address(index: usize) -> String {
    format!("127.0.0.{}", 11 + index)
}

/// The Galera 4 provider (`libgalera_smm.so`) where Debian or others put it.
pub(crate) fn provider() -> Option<PathBuf> {
    [
        "/usr/lib/galera/libgalera_smm.so",
        "/usr/lib/galera-4/libgalera_smm.so",
    ]
    .iter()
    .chain(&[
        "/usr/lib64/galera-4/libgalera_smm.so",
        "/usr/lib64/galera/libgalera_smm.so",
    ])
    .map(PathBuf::from)
    .find(|path| path.exists())
}

/// `--user=mysql` when root (see [`Galera::start`]).
fn user() -> Option<&'static str> {
    root().then_some("--user=mysql")
}

/// `mariadbd`, on the `PATH` or where Debian puts it.
fn mariadbd() -> PathBuf {
    on_path("mariadbd").unwrap_or_else(|| PathBuf::from("/usr/sbin/mariadbd"))
}
