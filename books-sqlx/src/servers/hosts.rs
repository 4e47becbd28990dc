//! The primary's hosts: the one or several a URL names (libpq's multi-host syntax), the
//! role the primary pool wants of a server (libpq's `target_session_attrs`), and which
//! host the pool connects to now, found again whenever the pool's server fails or turns
//! out to have another role.
//!
//! As pgx's `pgconn` and Npgsql do it: the hosts are tried in order, each connection made
//! is asked its role, and a server that is gone or of the wrong role is left for the
//! next. The primary pool's connect options name the host found; when it switches, the
//! pool drops every connection opened before (`before_acquire`), and the version check's
//! own connection goes too (the [`Generation`] it was opened at). While no host has the
//! role, requests are refused at once ("unavailable", 503), never held for the pool's
//! connect timeout, and the next one after [`RETRY_AFTER`] looks again.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{ConnectOptions, Pool};
use tokio::sync::Notify;
use tokio::time::timeout;

use super::{ConnectOptionsOf, Networked};
use crate::Error;
use crate::check::Generation;
use books_core::store::Unready;

/// How long one host may take to connect and say its role while looking for the primary.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long after a search that found no host with the role requests are refused at once,
/// before the next looks again.
pub const RETRY_AFTER: Duration = Duration::from_millis(250);

/// How long a request waits for a search under way before it is refused.
const SEARCH_WAIT: Duration = Duration::from_secs(2);

/// What a server may be asked to be, as libpq's `target_session_attrs` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SessionAttrs {
    /// Any server that accepts connections.
    Any,
    /// One that takes writes (the default for the primary pool).
    #[default]
    ReadWrite,
    /// One that does not.
    ReadOnly,
    /// One not in recovery.
    Primary,
    /// One in recovery (a standby).
    Standby,
    /// A standby if any answers, else any.
    PreferStandby,
}

impl SessionAttrs {
    /// libpq's name for it (`read-write` …).
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            _ => return None,
        })
    }

    /// libpq's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }

    /// Whether a server in `role` will do (`PreferStandby` takes a standby on its first
    /// pass, anything on its second).
    pub(crate) fn takes(self, role: Role, second_pass: bool) -> bool {
        match self {
            Self::Any => true,
            Self::ReadWrite => role.writable,
            Self::ReadOnly => !role.writable,
            Self::Primary => !role.in_recovery,
            Self::Standby => role.in_recovery,
            Self::PreferStandby => second_pass || role.in_recovery,
        }
    }
}

/// What a server said of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    /// It takes writes (PostgreSQL: not read-only; MariaDB: not read-only, and on Galera
    /// `Synced` and in the primary component).
    pub writable: bool,
    /// It replays another's writes (a PostgreSQL standby, a MariaDB replica).
    pub in_recovery: bool,
}

/// Where the search for the host stands, why the last found none, and which host the
/// pool connects to (the first until a search found another).
#[derive(Debug)]
struct State {
    search: Search,
    why: Option<Unready>,
    host: usize,
}

/// Where the search for the host stands.
#[derive(Debug, Clone, Copy)]
enum Search {
    /// The pool's host has the role, as far as anyone knows.
    Found,
    /// A search is under way.
    Running,
    /// The last search found no host with the role, or the pool's host failed.
    Lost { at: Instant },
}

/// A primary pool's hosts, and which one it connects to.
pub(crate) struct Hosts<DB: sqlx::Database> {
    hosts: Vec<ConnectOptionsOf<DB>>,
    attrs: SessionAttrs,
    state: Mutex<State>,
    searched: Notify,
    generation: std::sync::Arc<Generation>,
    /// When the pool last switched hosts (nanoseconds after `epoch`).
    switched: AtomicU64,
    epoch: Instant,
}

impl<DB: sqlx::Database> std::fmt::Debug for Hosts<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosts")
            .field("hosts", &self.hosts.len())
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
    /// first until a search says otherwise.
    pub(crate) fn new(hosts: Vec<ConnectOptionsOf<DB>>, attrs: SessionAttrs) -> Self {
        Self {
            hosts,
            attrs,
            state: Mutex::new(State {
                search: Search::Lost {
                    at: Instant::now() - RETRY_AFTER,
                },
                why: None,
                host: 0,
            }),
            searched: Notify::new(),
            generation: std::sync::Arc::default(),
            switched: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The first host's options (the pool's until a search finds the primary).
    pub(crate) fn first(&self) -> ConnectOptionsOf<DB> {
        self.hosts[0].clone()
    }

    /// The role the pool wants.
    pub(crate) fn attrs(&self) -> SessionAttrs {
        self.attrs
    }

    /// The switches' count, shared with the version check.
    pub(crate) fn generation(&self) -> std::sync::Arc<Generation> {
        self.generation.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a pooled connection opened `age` ago was opened since the pool's last
    /// switch (an older one is of the host before, and dropped).
    pub(crate) fn current(&self, age: Duration) -> bool {
        let switched = Duration::from_nanos(self.switched.load(Ordering::Acquire));
        self.epoch.elapsed().saturating_sub(age) >= switched
    }

    /// Waits until the pool's host is known to have the role: at once when it is; else
    /// for a search (this call's own, or one under way) to find it, at most
    /// [`SEARCH_WAIT`]. Refused at once ([`Unready`]) within [`RETRY_AFTER`] of a search
    /// that found none.
    pub(crate) async fn ready(&self, pool: &Pool<DB>) -> Result<(), Unready> {
        let deadline = Instant::now() + SEARCH_WAIT;
        loop {
            let searched = self.searched.notified();
            let start = {
                let mut state = self.lock();
                match state.search {
                    Search::Found => return Ok(()),
                    Search::Lost { at } if at.elapsed() < RETRY_AFTER => {
                        return Err(state.why.clone().unwrap_or(Unready::Unreachable));
                    }
                    Search::Lost { .. } => {
                        state.search = Search::Running;
                        true
                    }
                    Search::Running => false,
                }
            };
            if start {
                self.find(pool).await;
                continue;
            }
            if timeout(deadline.saturating_duration_since(Instant::now()), searched)
                .await
                .is_err()
            {
                return Err(Unready::Unreachable);
            }
        }
    }

    /// The pool's host failed (or said it is of another role): the next request looks
    /// again. Nothing if a switch happened since the failing connection was made.
    pub(crate) fn lost(&self) {
        let mut state = self.lock();
        if matches!(state.search, Search::Found) {
            tracing::warn!("the primary's server failed or changed its role: looking for it again");
            state.search = Search::Lost {
                at: Instant::now() - RETRY_AFTER,
            };
        }
    }

    /// Looks for the first host with the role, each asked in turn within
    /// [`PROBE_TIMEOUT`]; points `pool` at it (a new generation when it is another).
    async fn find(&self, pool: &Pool<DB>) {
        let mut found = None;
        let mut answered = false;
        'passes: for second_pass in [false, true] {
            for (index, host) in self.hosts.iter().enumerate() {
                let role = timeout(PROBE_TIMEOUT, role_of::<DB>(host)).await;
                let Ok(Ok(role)) = role else { continue };
                answered = true;
                if self.attrs.takes(role, second_pass) {
                    found = Some(index);
                    break 'passes;
                }
            }
            if self.attrs != SessionAttrs::PreferStandby {
                break;
            }
        }
        let mut state = self.lock();
        match found {
            Some(index) => {
                if index != state.host {
                    pool.set_connect_options(self.hosts[index].clone());
                    let now = self.epoch.elapsed().as_nanos() as u64;
                    self.switched.store(now, Ordering::Release);
                    self.generation.advance();
                    state.host = index;
                    tracing::info!(host = index, "the primary pool connects to another host");
                }
                (state.search, state.why) = (Search::Found, None);
            }
            None => {
                let why = if answered {
                    Unready::WrongRole(self.attrs.name())
                } else {
                    Unready::Unreachable
                };
                tracing::warn!(reason = %why, "no server for the primary pool; asking again shortly");
                state.search = Search::Lost { at: Instant::now() };
                state.why = Some(why);
            }
        }
        drop(state);
        self.searched.notify_waiters();
    }
}

/// The role of the server `options` reach, asked on a connection of its own.
async fn role_of<DB: Networked>(options: &ConnectOptionsOf<DB>) -> Result<Role, Error> {
    let mut conn = options.connect().await?;
    let role = DB::role(&mut conn).await;
    let _ = sqlx::Connection::close(conn).await;
    Ok(role?)
}
