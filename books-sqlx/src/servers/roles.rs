//! What a store asks of a server (libpq's `target_session_attrs`), what a server says of
//! itself when asked ([`Role`]), and what each host of a search was found to be
//! ([`Finding`]): the parts of the host search that need no pool.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use sqlx::ConnectOptions;
use tokio::time::timeout;

use super::{ConnectOptionsOf, Networked};

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

    /// Which of the hosts a search found (in the URL's order) the pool takes: `Some`
    /// once that is decided (`Some(None)`: none will do), `None` while a host before the
    /// one that would be taken has not answered yet. libpq's order, whatever order the
    /// answers come in.
    pub(crate) fn choose(self, findings: &[Option<Finding>]) -> Option<Option<usize>> {
        for (index, finding) in findings.iter().enumerate() {
            match finding {
                None => return None,
                Some(Finding::Role(role)) if self.takes(*role, false) => return Some(Some(index)),
                Some(_) => {}
            }
        }
        if self == Self::PreferStandby {
            let answered = findings
                .iter()
                .position(|f| matches!(f, Some(Finding::Role(_))));
            return Some(answered);
        }
        Some(None)
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

/// What one host was found to be when asked its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finding {
    /// It answered with its role.
    Role(Role),
    /// Nothing listens: the connection was refused.
    Refused,
    /// No answer within the probe's bound (a host cut off, a process stopped).
    TimedOut,
    /// The server refused the login (its words).
    LoginRefused(String),
    /// Anything else (the driver's words: a database that does not exist, a reset).
    Failed(String),
}

impl Finding {
    /// Whether the server answered (whatever its role).
    pub(crate) fn answered(&self) -> bool {
        matches!(self, Self::Role(_))
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Role(Role {
                in_recovery: true, ..
            }) => f.write_str("a standby (in recovery, read-only)"),
            Self::Role(Role {
                writable: false, ..
            }) => f.write_str(
                "read-only (PostgreSQL's default_transaction_read_only; on Galera, not Synced \
                 or outside the primary component)",
            ),
            Self::Role(_) => f.write_str("takes writes"),
            Self::Refused => f.write_str("refused the connection"),
            Self::TimedOut => f.write_str("did not answer in time"),
            Self::LoginRefused(why) => write!(f, "refused the login: {why}"),
            Self::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// What the server `options` reach says of its role, asked on a connection of its own
/// within `bound`. A connection not made after a quarter of the bound gets a second
/// attempt beside it (and so on, four in all), the first answer winning: a network path
/// that comes back while an attempt's first packet is lost answers the next attempt at
/// once, not after TCP's retransmission (a second, then two).
pub(crate) async fn probe<DB: Networked>(
    options: &ConnectOptionsOf<DB>,
    bound: Duration,
) -> Finding {
    let ask = || async {
        let mut conn = options.connect().await?;
        let role = DB::role(&mut conn).await;
        let _ = sqlx::Connection::close(conn).await;
        role
    };
    let again = bound / 4;
    let asked = timeout(bound, async {
        let mut asking = FuturesUnordered::new();
        asking.push(ask());
        loop {
            tokio::select! {
                Some(answer) = asking.next() => return answer,
                () = tokio::time::sleep(again), if asking.len() < 4 => asking.push(ask()),
            }
        }
    });
    match asked.await {
        Ok(Ok(role)) => Finding::Role(role),
        Ok(Err(error)) => found(&error),
        Err(_) => Finding::TimedOut,
    }
}

/// A failed probe's finding.
fn found(error: &sqlx::Error) -> Finding {
    match error {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            Finding::Refused
        }
        sqlx::Error::Database(db) if login_refused(db.code().as_deref()) => {
            Finding::LoginRefused(db.message().to_owned())
        }
        other => Finding::Failed(other.to_string()),
    }
}

/// PostgreSQL's invalid authorization (28000, 28P01) and MariaDB's access denied (its
/// SQLSTATE 28000).
fn login_refused(code: Option<&str>) -> bool {
    code.is_some_and(|code| code.starts_with("28"))
}

/// Each host's address and what it was found to be, in order: `a:1 refused the
/// connection; b:2 is a standby …`.
pub(crate) fn report<'a>(found: impl Iterator<Item = (&'a str, Option<&'a Finding>)>) -> String {
    let parts: Vec<String> = found
        .map(|(address, finding)| match finding {
            Some(finding @ Finding::Role(_)) => format!("{address}: {finding}"),
            Some(finding) => format!("{address} {finding}"),
            None => format!("{address}: not asked"),
        })
        .collect();
    parts.join("; ")
}
