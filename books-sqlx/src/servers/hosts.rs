//! The primary's hosts: the one or several a URL names (libpq's multi-host syntax), and
//! which one the pool connects to now, found again whenever the pool's server fails or
//! turns out to have another role.
//!
//! As pgx's `pgconn` and Npgsql choose: each host is asked its role on a connection of its
//! own, and the first in the URL's order with the role the pool wants is taken. The hosts
//! are asked at once, each within [`PROBE_TIMEOUT`], so a search takes as long as the
//! slowest host it has to wait for, not their sum. The search is a task of its own: a
//! caller that gives up (a readiness probe's limit, a client that hung up) leaves it
//! running, and the callers waiting for it are woken when it ends, each after at most
//! its own bound. While no host has the role, requests are refused at once
//! ("unavailable", 503) for [`RETRY_AFTER`], then the next one starts another search.
//!
//! When the pool's server fails (or is found to have another role), every connection
//! opened before is dropped before its next use or when it comes back to the pool
//! (`before_acquire`, `after_release`): one that hangs on a dead network path is never
//! pinged, and the version check's own connection goes too (the [`Generation`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use books_core::LogThrottle;
use books_core::store::Unready;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use sqlx::Pool;
use tokio::sync::Notify;
use tokio::time::timeout;

use super::roles::{Finding, SessionAttrs, probe, report};
use super::{ConnectOptionsOf, Networked};
use crate::check::Generation;

/// How long one host may take to connect and say its role while looking for the primary.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long after a search that found no host with the role requests are refused at once,
/// before the next looks again.
pub const RETRY_AFTER: Duration = Duration::from_millis(250);

/// How long a request waits for a search under way before it is refused.
const SEARCH_WAIT: Duration = Duration::from_secs(2);

/// How often a warning that repeats (no primary found) is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The search's bounds (the constants above; shorter in tests).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) probe: Duration,
    pub(crate) retry_after: Duration,
    pub(crate) wait: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            probe: PROBE_TIMEOUT,
            retry_after: RETRY_AFTER,
            wait: SEARCH_WAIT,
        }
    }
}

/// One host: how to connect, and its `host:port` for what the store says of it (and
/// its traces: the host and the port apart).
struct Host<DB: sqlx::Database> {
    options: ConnectOptionsOf<DB>,
    address: String,
    server: Option<(String, u16)>,
}

/// Where the search stands, which host the pool connects to (the first until a search
/// found another), and what each host said in the last search.
#[derive(Debug)]
struct State {
    search: Search,
    host: usize,
    why: Option<Unready>,
    findings: Vec<Option<Finding>>,
}

/// Where the search for the host stands.
#[derive(Debug, Clone, Copy)]
enum Search {
    /// The pool's host has the role, as far as anyone knows.
    Found,
    /// A search is under way.
    Running,
    /// The pool's host failed (`None`: look again at once), or the last search found no
    /// host with the role (look again from then on).
    Lost { again: Option<Instant> },
}

/// Puts a search that ends without finishing (its task panicked, or the runtime it ran
/// on shut down) back to lost, and wakes its waiters: the next caller starts another,
/// where "running" would answer every caller 503 for good.
struct Unfinished<'a, DB: Networked>(&'a Hosts<DB>);

impl<DB: Networked> Drop for Unfinished<'_, DB> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        if matches!(state.search, Search::Running) {
            state.search = Search::Lost { again: None };
        }
        drop(state);
        self.0.searched.notify_waiters();
    }
}

/// Ends a [`check`](Hosts::check), however its task ends.
struct Checked<'a>(&'a AtomicBool);

impl Drop for Checked<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A primary pool's hosts, and which one it connects to.
pub(crate) struct Hosts<DB: sqlx::Database> {
    hosts: Vec<Host<DB>>,
    attrs: SessionAttrs,
    bounds: Bounds,
    state: Mutex<State>,
    /// `state.host`, for the traces to read without the lock.
    current: AtomicUsize,
    searched: Notify,
    generation: Arc<Generation>,
    /// When the pool's connections last went stale (nanoseconds after `epoch`).
    stale_before: AtomicU64,
    epoch: Instant,
    /// "No primary" warnings (every failed search) at most once per [`WARN_EVERY`].
    none_found: LogThrottle,
    /// Whether the pool's host is being asked its role after a pool timeout.
    checking: AtomicBool,
}

impl<DB: sqlx::Database> std::fmt::Debug for Hosts<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addresses: Vec<&str> = self.hosts.iter().map(|h| h.address.as_str()).collect();
        f.debug_struct("Hosts")
            .field("hosts", &addresses)
            .field("attrs", &self.attrs)
            .field(
                "state",
                &*self.state.lock().unwrap_or_else(|e| e.into_inner()),
            )
            .finish()
    }
}

impl<DB: Networked> Hosts<DB> {
    /// `hosts` in order, the primary pool wanting `attrs`; the pool connects to the
    /// first until a search says otherwise, and the first request searches.
    pub(crate) fn new(hosts: Vec<ConnectOptionsOf<DB>>, attrs: SessionAttrs) -> Self {
        Self::with_bounds(hosts, attrs, Bounds::default())
    }

    pub(crate) fn with_bounds(
        hosts: Vec<ConnectOptionsOf<DB>>,
        attrs: SessionAttrs,
        bounds: Bounds,
    ) -> Self {
        let hosts: Vec<Host<DB>> = hosts
            .into_iter()
            .map(|options| {
                let address = DB::address(&options);
                let server = address.rsplit_once(':').and_then(|(host, port)| {
                    Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
                });
                Host {
                    address,
                    server,
                    options,
                }
            })
            .collect();
        Self {
            state: Mutex::new(State {
                search: Search::Lost { again: None },
                host: 0,
                why: None,
                findings: vec![None; hosts.len()],
            }),
            hosts,
            attrs,
            bounds,
            current: AtomicUsize::new(0),
            searched: Notify::new(),
            generation: Arc::default(),
            stale_before: AtomicU64::new(0),
            epoch: Instant::now(),
            none_found: LogThrottle::new(WARN_EVERY),
            checking: AtomicBool::new(false),
        }
    }

    /// The first host's options (the pool's until a search finds the primary).
    pub(crate) fn first(&self) -> ConnectOptionsOf<DB> {
        self.hosts[0].options.clone()
    }

    /// The role the pool wants.
    pub(crate) fn attrs(&self) -> SessionAttrs {
        self.attrs
    }

    /// The host the pool connects to now, and its port (none for a socket).
    pub(crate) fn current_server(&self) -> Option<(&str, u16)> {
        let host = &self.hosts[self.current.load(Ordering::Relaxed)];
        host.server
            .as_ref()
            .map(|(name, port)| (name.as_str(), *port))
    }

    /// The switches' count, shared with the version check.
    pub(crate) fn generation(&self) -> Arc<Generation> {
        self.generation.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a pooled connection opened `age` ago may still be used: opened since the
    /// pool's host last failed or changed (an older one is dropped).
    pub(crate) fn current(&self, age: Duration) -> bool {
        let stale_before = Duration::from_nanos(self.stale_before.load(Ordering::Acquire));
        self.epoch.elapsed().saturating_sub(age) >= stale_before
    }

    /// Every connection opened until now is of a host that failed or was left.
    fn connections_stale(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stale_before.store(now, Ordering::Release);
        self.generation.advance();
    }

    /// Waits until the pool's host is known to have the role: at once when it is; else
    /// for a search (started here if none is under way) to find it, at most the search
    /// bound. Refused at once ([`Unready`]) within [`RETRY_AFTER`] of a search that
    /// found none. Dropping the call leaves the search running. Gives the generation
    /// the caller works at, for [`lost`](Self::lost).
    pub(crate) async fn ready(self: &Arc<Self>, pool: &Pool<DB>) -> Result<u64, Unready> {
        let deadline = Instant::now().checked_add(self.bounds.wait);
        loop {
            // Registered before the state is read: a search that ends in between wakes it.
            let searched = self.searched.notified();
            {
                let mut state = self.lock();
                match state.search {
                    Search::Found => return Ok(self.generation.now()),
                    Search::Lost { again: Some(again) } if Instant::now() < again => {
                        return Err(state.why.clone().unwrap_or(Unready::Unreachable));
                    }
                    Search::Lost { .. } => {
                        state.search = Search::Running;
                        tokio::spawn(self.clone().find(pool.clone()));
                    }
                    Search::Running => {}
                }
            }
            let left = deadline.map_or(self.bounds.wait, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if timeout(left, searched).await.is_err() {
                return Err(self.lock().why.clone().unwrap_or(Unready::Unreachable));
            }
        }
    }

    /// The pool's host failed (or said it is of another role) for a caller that worked
    /// at generation `seen` ([`ready`](Self::ready)): every connection opened to it so
    /// far is dropped, and the next request looks again. Nothing if a search is under
    /// way or found none, or if the pool has moved on since `seen` (a request begun on
    /// the host left, failing late, does not send the new one's pool searching).
    pub(crate) fn lost(&self, seen: u64) {
        let mut state = self.lock();
        if matches!(state.search, Search::Found) && self.generation.now() == seen {
            let address = &self.hosts[state.host].address;
            tracing::warn!(
                host = %address,
                "the primary's server failed or changed its role: looking for it again"
            );
            state.search = Search::Lost { again: None };
            self.connections_stale();
        }
    }

    /// No pooled connection came in time for a caller that worked at generation `seen`:
    /// a busy pool, or a host that no longer answers (a connection to a host cut off
    /// hangs, and the pool's timeout comes before the primary's bound). The pool's host is
    /// asked its role on a connection of its own, one such check at a time, and taken as
    /// [`lost`](Self::lost) if it does not answer or has another role (a server that
    /// refuses the login, too many clients say, is there: kept).
    pub(crate) fn check(self: &Arc<Self>, seen: u64) {
        if self.checking.swap(true, Ordering::AcqRel) {
            return;
        }
        let hosts = self.clone();
        tokio::spawn(async move {
            let _done = Checked(&hosts.checking);
            let host = &hosts.hosts[hosts.current.load(Ordering::Relaxed)];
            let finding = probe::<DB>(&host.options, hosts.bounds.probe).await;
            let gone = match finding {
                Finding::Role(role) => !hosts.attrs.takes(role, true),
                Finding::Refused | Finding::TimedOut => true,
                Finding::LoginRefused(_) | Finding::Failed(_) => false,
            };
            if gone {
                hosts.lost(seen);
            }
        });
    }

    /// What each host said in the last search, in order (`a:1 refused the connection;
    /// b:2: a standby …`).
    pub(crate) fn report(&self) -> String {
        let state = self.lock();
        let found = self.hosts.iter().zip(&state.findings);
        report(found.map(|(host, finding)| (host.address.as_str(), finding.as_ref())))
    }

    /// Asks every host its role at once, each within the probe bound, and takes the
    /// first in order with the role as soon as every host before it has answered (or
    /// failed); points `pool` at it. Wakes every caller waiting when done.
    async fn find(self: Arc<Self>, pool: Pool<DB>) {
        let unfinished = Unfinished(&self);
        let bound = self.bounds.probe;
        let mut findings: Vec<Option<Finding>> = vec![None; self.hosts.len()];
        let mut probes: FuturesUnordered<_> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(index, host)| async move { (index, probe::<DB>(&host.options, bound).await) })
            .collect();
        let mut chosen = None;
        while let Some((index, finding)) = probes.next().await {
            findings[index] = Some(finding);
            if let Some(choice) = self.attrs.choose(&findings) {
                chosen = choice;
                break;
            }
        }
        drop(probes);
        let answered = findings.iter().flatten().any(Finding::answered);
        let mut state = self.lock();
        state.findings = findings;
        match chosen {
            Some(index) => {
                if index != state.host {
                    pool.set_connect_options(self.hosts[index].options.clone());
                    self.connections_stale();
                    state.host = index;
                    self.current.store(index, Ordering::Relaxed);
                    tracing::info!(
                        host = %self.hosts[index].address,
                        "the primary pool connects to another host"
                    );
                }
                (state.search, state.why) = (Search::Found, None);
            }
            None => {
                let why = if answered {
                    Unready::WrongRole(self.attrs.name())
                } else {
                    Unready::Unreachable
                };
                let again = Instant::now().checked_add(self.bounds.retry_after);
                state.search = Search::Lost { again };
                state.why = Some(why.clone());
                drop(state);
                self.warn_none_found(&why);
            }
        }
        self.searched.notify_waiters();
        // Finished: a search started since is not this one's to reset.
        std::mem::forget(unfinished);
    }

    /// Logs that no host has the role, with what each said: at most once per
    /// [`WARN_EVERY`], with how many searches found none since the last line.
    fn warn_none_found(&self, why: &Unready) {
        if let Some(held_back) = self.none_found.allow() {
            tracing::warn!(
                reason = %why,
                hosts = %self.report(),
                held_back,
                "no server for the primary pool; asking again shortly"
            );
        }
    }
}

#[cfg(test)]
mod tests;
