//! Network partitions on loopback: packets dropped (not refused) by an nftables table of
//! the test's own, as a firewall or a dead link would, so that a connection open across
//! the cut hangs and a new one is never answered. Every rule is in one table named after
//! the test process, removed when the [`Partition`] is healed or dropped (and, should a
//! test process die first, by the next partition made on the machine). Needs root and
//! `nft` (Debian's `nftables`); only loopback traffic is touched.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// One cut: its nftables table (`inet books_cut_<pid>_<n>`).
#[derive(Debug)]
pub struct Partition {
    table: String,
    /// When the cut began.
    pub since: Instant,
}

/// What a cut drops: loopback packets matched by port, by address, and by the sending
/// socket's owner.
#[derive(Debug, Clone, Default)]
pub struct Cut {
    rules: Vec<String>,
}

impl Cut {
    /// Every packet to or from `port`: whoever talks to the server there hears nothing.
    pub fn port(mut self, port: u16) -> Self {
        self.rules.push(format!("tcp dport {port} drop"));
        self.rules.push(format!("tcp sport {port} drop"));
        self
    }

    /// Every packet between the loopback addresses `a` and `b` (`127.0.0.11`): two
    /// processes that each bind their own address (Galera nodes do) stop hearing each
    /// other, and everyone else still hears both.
    pub fn between(mut self, a: &str, b: &str) -> Self {
        self.rules.push(format!("ip saddr {a} ip daddr {b} drop"));
        self.rules.push(format!("ip saddr {b} ip daddr {a} drop"));
        self
    }

    /// Packets to `port` from the sockets of the user `uid` outside the group `gid` (the
    /// other processes of a cluster run as one user: the one in `gid` still reaches its
    /// own server, everyone else of that user is cut off from it; other users are not).
    pub fn to_port_from_user_outside(mut self, port: u16, uid: u32, gid: u32) -> Self {
        self.rules.push(format!(
            "meta skuid {uid} meta skgid != {gid} tcp dport {port} drop"
        ));
        self
    }

    /// Packets from the sockets of the group `gid` to `port` (a node's processes cut off
    /// from the server there).
    pub fn from_group_to(mut self, gid: u32, port: u16) -> Self {
        self.rules
            .push(format!("meta skgid {gid} tcp dport {port} drop"));
        self
    }
}

impl Partition {
    /// Starts dropping what `cut` says; `None` if nftables refused (not root, no `nft`).
    pub fn start(cut: &Cut) -> Option<Self> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        remove_orphans();
        let table = format!(
            "books_cut_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut script = format!(
            "add table inet {table}\n\
             add chain inet {table} out {{ type filter hook output priority -10; policy accept; }}\n"
        );
        for rule in &cut.rules {
            script.push_str(&format!(
                "add rule inet {table} out oifname \"lo\" {rule}\n"
            ));
        }
        nft(&script).then(|| Self {
            table,
            since: Instant::now(),
        })
    }

    /// Whether `nft` can make a table here (root, nftables installed).
    pub fn available() -> bool {
        let probe = format!("books_cut_probe_{}", std::process::id());
        nft(&format!(
            "add table inet {probe}\ndelete table inet {probe}\n"
        ))
    }

    /// Stops dropping; whether the rules are gone.
    pub fn heal(mut self) -> bool {
        let healed = self.remove();
        std::mem::forget(self);
        healed
    }

    fn remove(&mut self) -> bool {
        nft(&format!("delete table inet {}\n", self.table))
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Runs an nft script (`nft -f -`); whether it succeeded.
fn nft(script: &str) -> bool {
    use std::io::Write;
    let Ok(mut child) = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let written = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(script.as_bytes()).is_ok());
    child.wait().is_ok_and(|status| status.success()) && written
}

/// Removes the tables of test processes that are gone (a test killed mid-cut).
fn remove_orphans() {
    let Ok(listed) = Command::new("nft").args(["list", "tables"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let Some(name) = line.strip_prefix("table inet books_cut_") else {
            continue;
        };
        let pid = name.split('_').next().unwrap_or_default();
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            nft(&format!("delete table inet books_cut_{name}\n"));
        }
    }
}
