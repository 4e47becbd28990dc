//! PostgreSQL's processes by data directory, for fixtures that kill them: the running
//! postmaster, its children, and the shared memory a killed one leaves behind.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::{output_within, signal_process};

/// The PID of the running postmaster of the data directory `data` (checked against its
/// command line: a stale `postmaster.pid` may name another process).
pub(crate) fn postmaster_pid(data: &str) -> Option<String> {
    let pid = std::fs::read_to_string(Path::new(data).join("postmaster.pid")).ok()?;
    let pid = pid.lines().next()?.trim().to_owned();
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let ours = String::from_utf8_lossy(&command).contains(&format!("-D\0{data}\0"));
    ours.then_some(pid)
}

/// The PIDs of the processes whose parent is `parent` (from `/proc`).
pub(crate) fn children_of(parent: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let child = |name: String| {
        let stat = std::fs::read_to_string(format!("/proc/{name}/stat")).ok()?;
        // After the command name: the state, then the parent's PID.
        let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
        (ppid == parent).then_some(name)
    };
    let names = entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok());
    names.filter_map(child).collect()
}

/// Removes the (small) System V shared memory segment a killed postmaster of `data` left
/// behind: the one keyed in its `postmaster.pid`, which a clean stop removes.
pub(crate) fn remove_segment(data: &str) {
    let pid_file = std::fs::read_to_string(Path::new(data).join("postmaster.pid"));
    let key = |file: String| Some(file.lines().nth(6)?.split_whitespace().next()?.to_owned());
    if let Some(key) = pid_file.ok().and_then(key).filter(|key| key != "0") {
        let mut ipcrm = Command::new("ipcrm");
        let _ = output_within(ipcrm.args(["-M", &key]), Duration::from_secs(5));
    }
}

/// Kills (`SIGKILL`) the postmaster of `data` and every process it started: a backend
/// outlives its postmaster a moment, and a frozen WAL sender would hold its shared memory
/// (and stop it from starting again) for good.
pub(crate) fn kill_postgres(data: &str) {
    if let Some(postmaster) = postmaster_pid(data) {
        let children = children_of(&postmaster);
        signal_process(&postmaster, "KILL");
        children.iter().for_each(|pid| signal_process(pid, "KILL"));
    }
}
