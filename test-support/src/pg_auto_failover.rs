//! A pg_auto_failover formation of a test's own (`pg_autoctl`, Debian's
//! `postgresql-15-auto-failover`): a monitor, a primary and a standby, each a
//! `pg_autoctl run` this fixture supervises.
//!
//! The monitor checks the nodes faster than by default (every second; a node is unhealthy
//! after 3 s; a primary that does not answer is taken as demoted after 3 s), so a failover
//! after a kill takes seconds, not the default ~50 s. `fsync` is off everywhere, and a
//! replication connection that hears nothing back ends after 5 s (not 60 s). Run as
//! root, each node's processes have a group of their own, so that a [`Cut`] can part a
//! node from the rest of the formation and leave it to its clients
//! ([`cut_off`](PgAutoFailover::cut_off)).
//!
//! One file of about 500 lines: the formation's start, what it reports and the faults a
//! test makes (switchover, kill, restart, cut) all work on the same keepers and scratch
//! directory; the processes by data directory are in `pg_processes`.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::pg_processes::{children_of, kill_postgres, postmaster_pid, remove_segment};
use crate::{
    Cut, Partition, as_postgres, free_port, left, on_path, output_within, pg_tool, psql, root,
    scratch, signal_group, signal_process, wait_for_port, wait_until,
};

/// The monitor's settings (pg_auto_failover's own knobs, reloaded): a failover in seconds.
const MONITOR_SETTINGS: [&str; 7] = [
    "pgautofailover.health_check_period = 1000",
    "pgautofailover.health_check_timeout = 1000",
    "pgautofailover.health_check_retry_delay = 500",
    "pgautofailover.health_check_max_retries = 1",
    "pgautofailover.node_considered_unhealthy_timeout = 3000",
    "pgautofailover.primary_demote_timeout = 3000",
    "fsync = off",
];

const LOOPBACK: &str = "127.0.0.1";

/// Node `n`'s processes run with group `NODE_GROUPS + n` (as root; no such group need
/// exist: nftables matches the number).
const NODE_GROUPS: u32 = 61_000;

/// One `pg_autoctl run` (the monitor or a node's keeper) and its PostgreSQL.
#[derive(Debug)]
struct Keeper {
    name: String,
    port: u16,
    /// `runuser` or `setpriv`, then `pg_autoctl`: leader of a process group that holds its
    /// PostgreSQL too.
    child: Option<Child>,
    /// The group its processes run with (a node's, as root), for a [`Cut`] to match.
    group: Option<u32>,
}

/// A pg_auto_failover formation of a test's own: a monitor and two PostgreSQL nodes (a
/// primary and a standby, user `postgres` trusted over 127.0.0.1) on free loopback ports;
/// its processes are killed and its directory removed when dropped.
#[derive(Debug)]
pub struct PgAutoFailover {
    dir: PathBuf,
    monitor: Keeper,
    nodes: Vec<Keeper>,
}

impl PgAutoFailover {
    /// A new formation, started: the monitor, then a primary, then a standby; `None` if
    /// `pg_autoctl` is missing or the formation did not report one primary and one
    /// secondary within 120 s.
    pub fn start() -> Option<Self> {
        if !crate::have_pg_auto_failover() {
            return None;
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut formation = Self {
            dir: scratch("pg-auto-failover")?,
            monitor: Keeper::new("monitor", None),
            nodes: vec![],
        };
        let monitor = formation.create(&formation.monitor, &[])?;
        formation.monitor.child = Some(monitor);
        let query = "SELECT count(*) FROM pgautofailover.formation";
        let monitor_up = wait_until(left(deadline), Duration::from_millis(200), || {
            formation.monitor_sql(query).is_some()
        });
        let tuned = MONITOR_SETTINGS.iter().all(|setting| {
            formation
                .monitor_sql(&format!("ALTER SYSTEM SET {setting}"))
                .is_some()
        });
        if !(monitor_up && tuned && formation.monitor_sql("SELECT pg_reload_conf()").is_some()) {
            return None;
        }
        let first = formation.add_node()?;
        let single = wait_until(left(deadline), Duration::from_millis(200), || {
            formation.node_states() == [(first, "single".into(), "single".into())]
        });
        let fast = [
            "ALTER SYSTEM SET fsync = off",
            "ALTER SYSTEM SET wal_sender_timeout = '5s'",
            "SELECT pg_reload_conf()",
        ]
        .iter()
        .all(|sql| formation.sql(first, "postgres", sql).is_some());
        if !(single && fast) {
            return None;
        }
        formation.add_node()?;
        // The standby's pg_basebackup waits for a spread checkpoint: hurry it.
        let settled = wait_until(left(deadline), Duration::from_millis(300), || {
            formation.settled() || {
                formation.sql(first, "postgres", "CHECKPOINT");
                false
            }
        });
        settled.then_some(formation)
    }

    /// The libpq multi-host URL of `database` on both nodes, as user `postgres`, that
    /// connects to the one accepting writes (`target_session_attrs=read-write`).
    pub fn url(&self, database: &str) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{LOOPBACK}:{}", n.port))
            .collect();
        format!(
            "postgres://postgres@{}/{database}?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    /// The URL of `database` on the node at `port` alone, as user `postgres`.
    pub fn node_url(port: u16, database: &str) -> String {
        format!("postgres://postgres@{LOOPBACK}:{port}/{database}")
    }

    /// The nodes' ports (127.0.0.1), first node first.
    pub fn node_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|node| node.port).collect()
    }

    /// The monitor's port (127.0.0.1; database `pg_auto_failover`).
    pub fn monitor_port(&self) -> u16 {
        self.monitor.port
    }

    /// The monitor's view: each node's port, reported state and assigned state (`primary`,
    /// `secondary`, `wait_primary`, `catchingup`, `demoted`, ...), first node first.
    pub fn node_states(&self) -> Vec<(u16, String, String)> {
        let query = "SELECT nodeport, reportedstate, goalstate FROM pgautofailover.node \
                     ORDER BY nodeid";
        let rows = self.monitor_sql(query).unwrap_or_default();
        rows.lines()
            .filter_map(|row| {
                let mut fields = row.split('|');
                let port = fields.next()?.parse().ok()?;
                Some((port, fields.next()?.into(), fields.next()?.into()))
            })
            .collect()
    }

    /// The port of the one node that is out of recovery and not read-only, asked of the
    /// nodes themselves; `None` if none is, or both are.
    pub fn primary_port(&self) -> Option<u16> {
        let query = "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool";
        let writable: Vec<u16> = self
            .node_ports()
            .into_iter()
            .filter(|&port| self.sql(port, "postgres", query).as_deref() == Some("f"))
            .collect();
        match writable[..] {
            [port] => Some(port),
            _ => None,
        }
    }

    /// Waits up to `within` for a node (not `other_than`) that is out of recovery and
    /// commits a write (`pg_auto_failover_probe`, a table of database `postgres`); its port.
    pub fn wait_for_primary(&self, other_than: Option<u16>, within: Duration) -> Option<u16> {
        let probe = "CREATE TABLE IF NOT EXISTS pg_auto_failover_probe (at timestamptz); \
                     INSERT INTO pg_auto_failover_probe VALUES (now()); \
                     SELECT NOT pg_is_in_recovery()";
        let mut found = None;
        wait_until(within, Duration::from_millis(200), || {
            let mut candidates = self
                .node_ports()
                .into_iter()
                .filter(|&p| Some(p) != other_than);
            let url = |port| Self::node_url(port, "postgres");
            found = candidates
                .find(|&p| psql(&url(p), probe, Duration::from_secs(3)).as_deref() == Some("t"));
            found.is_some()
        });
        found
    }

    /// Runs `sql` on the node at `port` (`psql`, database `database`, within 30 s); its
    /// output (unaligned, tuples only, trimmed) if it succeeded.
    pub fn sql(&self, port: u16, database: &str, sql: &str) -> Option<String> {
        Self::sql_url(&Self::node_url(port, database), sql)
    }

    /// Runs `sql` at `url` (any libpq URL, e.g. [`url`](Self::url)) with `psql` within
    /// 30 s; its output (unaligned, tuples only, trimmed) if it succeeded.
    pub fn sql_url(url: &str, sql: &str) -> Option<String> {
        psql(url, sql, Duration::from_secs(30))
    }

    /// Creates database `name` on the primary (the standby gets it by replication);
    /// whether it did.
    pub fn create_database(&self, name: &str) -> bool {
        let Some(primary) = self.wait_for_primary(None, Duration::from_secs(30)) else {
            return false;
        };
        let sql = format!("CREATE DATABASE \"{name}\"");
        self.sql(primary, "postgres", &sql).is_some()
    }

    /// Makes replication asynchronous (`pg_autoctl set node replication-quorum false` on
    /// every node: the primary's `synchronous_standby_names` becomes empty), so that a
    /// commit the standby never got can be lost in a failover; whether it did, within 30 s.
    pub fn set_asynchronous(&self) -> bool {
        let names: Vec<&str> = self.nodes.iter().map(|node| node.name.as_str()).collect();
        let data = self.data("monitor");
        let set = names.iter().all(|name| {
            let mut set = self.autoctl();
            set.args(["set", "node", "replication-quorum", "--pgdata", &data]);
            set.args(["--name", name, "false"]);
            output_within(&mut set, Duration::from_secs(30)).is_some()
        });
        set && wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
            self.settled()
                && self.primary_port().is_some_and(|port| {
                    let query = "SHOW synchronous_standby_names";
                    self.sql(port, "postgres", query).as_deref() == Some("")
                })
        })
    }

    /// Freezes (`SIGSTOP`) the primary's WAL senders: the standby receives nothing more
    /// until [`resume_replication`](Self::resume_replication), so that once replication
    /// is [asynchronous](Self::set_asynchronous) a commit can be lost by a failover;
    /// whether there was a sender to freeze.
    pub fn pause_replication(&self) -> bool {
        self.signal_senders("STOP")
    }

    /// Thaws (`SIGCONT`) the WAL senders [`pause_replication`](Self::pause_replication)
    /// froze; whether there was one.
    pub fn resume_replication(&self) -> bool {
        self.signal_senders("CONT")
    }

    /// Sends `signal` to the primary's streaming WAL senders (waiting up to 10 s for one);
    /// whether there was one.
    fn signal_senders(&self, signal: &str) -> bool {
        let query = "SELECT pid FROM pg_stat_replication WHERE state = 'streaming'";
        let mut pids = String::new();
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || {
            let primary = self.primary_port();
            pids = primary
                .and_then(|p| self.sql(p, "postgres", query))
                .unwrap_or_default();
            !pids.is_empty()
        });
        pids.lines().for_each(|pid| signal_process(pid, signal));
        !pids.is_empty()
    }

    /// `pg_autoctl perform switchover`: the standby becomes the primary, the primary its
    /// standby; the new primary's port once the formation has settled again (within 90 s).
    pub fn switchover(&self) -> Option<u16> {
        let before = self.primary_port()?;
        let data = self.data("monitor");
        let args = ["perform", "switchover", "--pgdata", &data, "--wait", "60"];
        let _ = output_within(self.autoctl().args(args), Duration::from_secs(70));
        let mut after = None;
        wait_until(Duration::from_secs(20), Duration::from_millis(200), || {
            after = self.primary_port().filter(|&port| port != before);
            after.is_some() && self.settled()
        });
        after
    }

    /// Parts the node at `port` from the monitor and the other nodes, as a network
    /// partition would, while clients of other users (the test's own, as root) still
    /// reach it (a [`Cut`] by the node's group). A connection open across the cut stays
    /// half open: the node's replication still sends (its WAL may reach the standby) and
    /// hears nothing back, until `wal_sender_timeout` (5 s here) ends it. `None` unless
    /// run as root with nftables.
    pub fn cut_off(&self, port: u16) -> Option<Partition> {
        let node = self.nodes.iter().find(|node| node.port == port)?;
        let (group, postgres) = (node.group?, postgres_uid()?);
        let mut cut = Cut::default()
            .to_port_from_user_outside(port, postgres, group)
            .from_group_to(group, self.monitor.port);
        for other in self.nodes.iter().filter(|other| other.port != port) {
            cut = cut.from_group_to(group, other.port);
        }
        Partition::start(&cut)
    }

    /// Kills the primary's PostgreSQL and its keeper (`SIGKILL`), so it stays down and the
    /// monitor fails over to the standby; the killed node's port.
    pub fn kill_primary(&mut self) -> Option<u16> {
        let port = self.primary_port()?;
        self.kill_node(port).then_some(port)
    }

    /// Kills the node at `port`: its PostgreSQL and its keeper (`SIGKILL`); whether it was
    /// running.
    pub fn kill_node(&mut self, port: u16) -> bool {
        let data = self.data_of(port);
        let Some(node) = self.nodes.iter_mut().find(|node| node.port == port) else {
            return false;
        };
        let Some(mut child) = node.child.take() else {
            return false;
        };
        // Its postmaster first, while its children are still known as such.
        if let Some(data) = data {
            kill_postgres(&data);
        }
        signal_group(child.id(), "KILL");
        let _ = child.wait();
        wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
            !wait_for_port(port, Duration::from_millis(50))
        })
    }

    /// Starts a killed node's keeper again (`pg_autoctl run`): it rejoins as a standby
    /// (`pg_rewind` if it must); whether the formation settled within 90 s.
    pub fn restart_node(&mut self, port: u16) -> bool {
        let Some(index) = self.nodes.iter().position(|node| node.port == port) else {
            return false;
        };
        if self.nodes[index].child.is_none() {
            let data = self.data(&self.nodes[index].name);
            let name = self.nodes[index].name.clone();
            let group = self.nodes[index].group;
            let Some(child) = self.spawn(&name, group, &["run", "--pgdata", &data]) else {
                return false;
            };
            self.nodes[index].child = Some(child);
        }
        wait_until(Duration::from_secs(90), Duration::from_millis(200), || {
            self.settled()
                && self
                    .node_states()
                    .contains(&(port, "secondary".into(), "secondary".into()))
        })
    }

    /// Whether the monitor reports one primary and every other node secondary, as assigned.
    fn settled(&self) -> bool {
        let states = self.node_states();
        let count = |state: &str| {
            let is =
                |(_, reported, goal): &&(u16, String, String)| reported == state && goal == state;
            states.iter().filter(is).count()
        };
        states.len() == self.nodes.len()
            && count("primary") == 1
            && count("secondary") == states.len() - 1
    }

    /// Registers a new node with the monitor and runs its keeper (`pg_autoctl create
    /// postgres --run`): the first becomes the primary, the next its standby; its port.
    fn add_node(&mut self) -> Option<u16> {
        let n = self.nodes.len() + 1;
        let group = root().then(|| NODE_GROUPS + n as u32);
        let node = Keeper::new(&format!("node{n}"), group);
        let monitor = format!(
            "postgres://autoctl_node@{LOOPBACK}:{}/pg_auto_failover?sslmode=disable",
            self.monitor.port
        );
        let extra = [
            "--name",
            &node.name,
            "--username",
            "postgres",
            "--monitor",
            &monitor,
        ];
        let child = self.create(&node, &extra)?;
        let port = node.port;
        self.nodes.push(Keeper {
            child: Some(child),
            ..node
        });
        Some(port)
    }

    /// `pg_autoctl create monitor|postgres ... --run` for `keeper` (the monitor if so
    /// named), on loopback, trusting, without TLS.
    fn create(&self, keeper: &Keeper, extra: &[&str]) -> Option<Child> {
        let (data, port) = (self.data(&keeper.name), keeper.port.to_string());
        let pg_ctl = pg_tool("pg_ctl").display().to_string();
        let what = if keeper.name == "monitor" {
            "monitor"
        } else {
            "postgres"
        };
        let mut args = vec!["create", what, "--pgdata", &data, "--pgport", &port];
        args.extend([
            "--listen",
            LOOPBACK,
            "--hostname",
            LOOPBACK,
            "--pgctl",
            &pg_ctl,
        ]);
        args.extend(["--auth", "trust", "--no-ssl", "--run"]);
        args.extend(extra);
        self.spawn(&keeper.name, keeper.group, &args)
    }

    fn monitor_sql(&self, sql: &str) -> Option<String> {
        self.sql(self.monitor.port, "pg_auto_failover", sql)
    }

    fn data(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn data_of(&self, port: u16) -> Option<String> {
        let node = self.nodes.iter().find(|node| node.port == port)?;
        Some(self.data(&node.name))
    }

    /// `pg_autoctl` as the `postgres` user, its configuration and state in the scratch
    /// directory (`XDG_*`), apart from any other formation's.
    fn autoctl(&self) -> Command {
        self.autoctl_in(None)
    }

    /// [`autoctl`](Self::autoctl) with `group` as its group (`setpriv`, which keeps
    /// root's environment: `HOME` is the scratch directory then), if given.
    fn autoctl_in(&self, group: Option<u32>) -> Command {
        let env = on_path("env").unwrap_or_else(|| "/usr/bin/env".into());
        let mut command = match group {
            Some(group) => {
                let mut command = Command::new("setpriv");
                let group = format!("--regid={group}");
                command.args(["--reuid=postgres", &group, "--clear-groups", "--"]);
                command.arg(env);
                command.arg(format!("HOME={}", self.dir.display()));
                command
            }
            None => as_postgres(&env),
        };
        for (variable, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "share")] {
            command.arg(format!("{variable}={}", self.dir.join(sub).display()));
        }
        command.arg(format!("XDG_RUNTIME_DIR={}", self.dir.display()));
        command.arg(on_path("pg_autoctl").unwrap_or_else(|| "pg_autoctl".into()));
        command
    }

    /// Spawns `pg_autoctl args` in a process group of its own (with `group`, if given),
    /// logging to `<name>.log`.
    fn spawn(&self, name: &str, group: Option<u32>, args: &[&str]) -> Option<Child> {
        use std::os::unix::process::CommandExt;
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .ok()?;
        self.autoctl_in(group)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().ok()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .ok()
    }
}

impl Keeper {
    fn new(name: &str, group: Option<u32>) -> Self {
        Self {
            name: name.into(),
            port: free_port(),
            child: None,
            group,
        }
    }
}

impl Drop for PgAutoFailover {
    fn drop(&mut self) {
        let data: Vec<String> = self
            .nodes
            .iter()
            .chain([&self.monitor])
            .map(|k| self.data(&k.name))
            .collect();
        // A WAL sender left frozen would hold up the shutdown.
        for postmaster in data.iter().filter_map(|data| postmaster_pid(data)) {
            children_of(&postmaster)
                .iter()
                .for_each(|pid| signal_process(pid, "CONT"));
        }
        // SIGQUIT: pg_autoctl and PostgreSQL stop at once (immediate shutdown).
        let keepers = self.nodes.iter_mut().chain([&mut self.monitor]);
        let mut children: Vec<Child> = keepers.filter_map(|keeper| keeper.child.take()).collect();
        for child in &children {
            signal_group(child.id(), "QUIT");
        }
        wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
            data.iter().all(|data| postmaster_pid(data).is_none())
        });
        for child in &mut children {
            signal_group(child.id(), "KILL");
            let _ = child.wait();
        }
        data.iter().for_each(|data| kill_postgres(data));
        data.iter().for_each(|data| remove_segment(data));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `postgres` user's id.
fn postgres_uid() -> Option<u32> {
    let id = Command::new("id").args(["-u", "postgres"]).output().ok()?;
    String::from_utf8_lossy(&id.stdout).trim().parse().ok()
}
