//! Errors of setting a store up, and how driver errors map to [`StoreError`].

use std::sync::Arc;

use books_core::store::StoreError;
#[cfg(any(feature = "postgres", feature = "mysql"))]
use books_core::store::Unready;
#[cfg(feature = "mysql")]
use sqlx::mysql::MySqlDatabaseError;

/// Why connecting to or migrating a database failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver failed (bad URL, unreachable server, I/O …).
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// Applying the embedded migrations failed.
    #[error("migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A PostgreSQL schema or MariaDB database name the store does not accept.
    #[error("invalid schema name {0:?}: use 1 to 63 of a-z, 0-9 and _, not starting with a digit")]
    InvalidSchema(String),
    /// A database URL the store cannot follow (a malformed host list, a
    /// `target_session_attrs` libpq does not know); the password is left out.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// A database URL that names no store of this crate's (or one whose feature is off).
    #[error("unsupported database URL {0:?} (expected sqlite:…, postgres://… or mysql://…)")]
    UnknownDatabase(String),
    /// A setting for another database, named as [`StoreSettings`](crate::StoreSettings)
    /// names it: push mode, a pooler and a notify URL are PostgreSQL's, replicas
    /// PostgreSQL's and MariaDB's.
    #[error("the setting {0} does not apply to this database")]
    NotForThisDatabase(&'static str),
    /// No host of the store's URL has the role it wants (by default, takes writes):
    /// each host and what it was found to be.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    #[error("no server is {wanted}: {hosts}")]
    NoPrimary {
        /// The role wanted (`read-write` …).
        wanted: &'static str,
        /// Why, in short.
        why: Unready,
        /// Each host, in order, and what it was found to be.
        hosts: String,
    },
    /// Push mode through a transaction pooler without a direct URL to listen on.
    #[error(
        "push mode listens for the database's notifications, which a transaction pooler \
         does not pass on: give a direct PostgreSQL URL to listen on (notify_url)"
    )]
    PushNeedsDirectConnection,
}

/// Driver results mapped to the store contract's errors.
pub(crate) trait OrStoreError<T> {
    /// Connection trouble and timeouts are "unavailable" (503), the rest a 500.
    fn or_store_error(self) -> Result<T, StoreError>;
    /// As [`or_store_error`](Self::or_store_error), and a foreign-key violation is the
    /// author of the write vanishing (422 on `author_id`).
    fn or_write_error(self, author_id: i64) -> Result<T, StoreError>;
}

impl<T> OrStoreError<T> for Result<T, sqlx::Error> {
    fn or_store_error(self) -> Result<T, StoreError> {
        self.map_err(|e| store_error(e, None))
    }

    fn or_write_error(self, author_id: i64) -> Result<T, StoreError> {
        self.map_err(|e| store_error(e, Some(author_id)))
    }
}

/// This crate's errors as the store contract's, for a store built on its helpers
/// ([`VersionTriggers`](crate::VersionTriggers)' reads and `?`): the driver's sorted by
/// [`store_error`], anything else [`StoreError::Other`].
impl From<Error> for StoreError {
    fn from(error: Error) -> Self {
        match error {
            Error::Database(error) => store_error(error, None),
            other => StoreError::other(other),
        }
    }
}

/// A driver error as the store contract's [`StoreError`], for a store of a host's own:
/// what a retry may cure is [`StoreError::Unavailable`] (503) — a refused or lost
/// connection, a pool or lock wait that timed out, a statement cancelled by its time
/// bound, a database starting, shutting down, read-only during a failover, or (MariaDB)
/// a deadlock or certification conflict ([`is_unavailable`]) — the rest
/// [`StoreError::Other`] (500). With `author_id`, a foreign-key violation is that author
/// missing ([`StoreError::AuthorNotFound`], 422), as a write's would be.
///
/// ```
/// use books_core::store::StoreError;
/// let refused = books_sqlx::sqlx::Error::PoolTimedOut;
/// assert!(matches!(books_sqlx::store_error(refused, None), StoreError::Unavailable(_)));
/// ```
pub fn store_error(error: sqlx::Error, author_id: Option<i64>) -> StoreError {
    if is_unavailable(&error) {
        return StoreError::unavailable(error);
    }
    match (&error, author_id) {
        (sqlx::Error::Database(db), Some(id)) if db.is_foreign_key_violation() => {
            StoreError::AuthorNotFound(id)
        }
        _ => StoreError::other(error),
    }
}

/// Whether the database could not be reached, timed out, or says to try again later
/// (503, worth a retry): see [`store_error`].
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match error {
        E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::WorkerCrashed => true,
        #[cfg(feature = "mysql")]
        E::Database(db) if db.try_downcast_ref::<MySqlDatabaseError>().is_some() => {
            is_transient_mysql(db.downcast_ref::<MySqlDatabaseError>().number())
        }
        E::Database(db) => is_transient(db.code().as_deref()),
        _ => false,
    }
}

/// Whether a MariaDB (or MySQL) error number says "try again later": lock wait timeout
/// (1205), deadlock (1213; the store has retried once already where it may), too many
/// connections (1040, 1203, 1226), a read-only server during a failover (1290, 1836,
/// 1792), a connection lost or killed (2006, 2013, 1927, 4031, 1053 server shutdown,
/// 1158–1161 network errors), an interrupted or timed-out statement (1317, 1969 MariaDB's
/// `max_statement_time`, 3024 MySQL's `max_execution_time`), a Galera node not ready
/// (1047), the host blocked (1129).
#[cfg(feature = "mysql")]
pub(crate) fn is_transient_mysql(number: u16) -> bool {
    matches!(
        number,
        1040 | 1047 | 1053 | 1129 | 1158
            ..=1161
                | 1203
                | 1205
                | 1213
                | 1226
                | 1290
                | 1317
                | 1792
                | 1836
                | 1927
                | 1969
                | 2006
                | 2013
                | 3024
                | 4031
    )
}

/// Whether `error` is a deadlock (MariaDB 1213: the transaction was rolled back, and a
/// write that is safe to repeat may be sent again).
#[cfg(feature = "mysql")]
pub(crate) fn is_deadlock(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|e| e.number() == 1213),
        _ => false,
    }
}

/// One driver error that failed several requests at once (a batch of creates).
#[derive(Debug, thiserror::Error)]
#[error("a write of several books failed")]
pub(crate) struct Shared(#[source] pub(crate) Arc<sqlx::Error>);

/// A store error shared by several callers (of one [`SharedCheck`]), as each one's own:
/// unavailable stays unavailable.
///
/// [`SharedCheck`]: books_core::store::SharedCheck
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn shared(error: Arc<StoreError>) -> StoreError {
    #[derive(Debug, thiserror::Error)]
    #[error(transparent)]
    struct Shared(Arc<StoreError>);
    match &*error {
        StoreError::Unavailable(_) => StoreError::unavailable(Shared(error)),
        _ => StoreError::other(Shared(error)),
    }
}

/// SQLite busy/locked; PostgreSQL's and PgBouncer's "try again later".
fn is_transient(code: Option<&str>) -> bool {
    match code {
        // PostgreSQL SQLSTATE (five characters): connection exceptions (class 08, which
        // is also what PgBouncer sends for its own pool and login failures), read-only
        // transaction (a primary that became a standby), too many connections and
        // configuration limits, object not in prerequisite state (a database not
        // accepting connections, WAL functions during recovery), statement timeout,
        // admin/crash shutdown, cannot connect now, idle-session timeout; a transaction
        // rolled back to settle a conflict (serialization failure, deadlock).
        Some(code) if code.len() == 5 => {
            code.starts_with("08")
                || matches!(
                    code,
                    "40001"
                        | "40P01"
                        | "25006"
                        | "53300"
                        | "53400"
                        | "55000"
                        | "57014"
                        | "57P01"
                        | "57P02"
                        | "57P03"
                        | "57P05"
                )
        }
        // SQLite result codes: SQLITE_BUSY, SQLITE_LOCKED and their extended codes.
        Some(code) => code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6)),
        None => false,
    }
}

/// An error of work done on the primary: the driver's, or the store contract's.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) trait PrimaryError: Sized {
    /// The error of work refused because there is no primary.
    fn unready(why: Unready) -> Self;
    /// The error of work the primary did not finish within
    /// [`PRIMARY_TIMEOUT`](crate::PRIMARY_TIMEOUT).
    fn timed_out() -> Self;
    /// The driver's error inside, if any.
    fn driver(&self) -> Option<&sqlx::Error>;
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl PrimaryError for sqlx::Error {
    fn unready(why: Unready) -> Self {
        sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::NotConnected, why))
    }

    fn timed_out() -> Self {
        sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            TimedOut(crate::PRIMARY_TIMEOUT),
        ))
    }

    fn driver(&self) -> Option<&sqlx::Error> {
        Some(self)
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl PrimaryError for StoreError {
    fn unready(why: Unready) -> Self {
        StoreError::unavailable(why)
    }

    fn timed_out() -> Self {
        StoreError::unavailable(TimedOut(crate::PRIMARY_TIMEOUT))
    }

    fn driver(&self) -> Option<&sqlx::Error> {
        let source = match self {
            StoreError::Unavailable(source) | StoreError::Other(source) => source,
            _ => return None,
        };
        source.downcast_ref::<sqlx::Error>()
    }
}

/// The primary did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("the primary did not answer within {0:?}")]
pub(crate) struct TimedOut(pub(crate) std::time::Duration);

#[cfg(test)]
mod tests {
    use super::is_transient;

    #[test]
    fn transient_codes() {
        assert!(is_transient(Some("5")));
        assert!(is_transient(Some("517")));
        assert!(is_transient(Some("6")));
        assert!(is_transient(Some("08006")));
        assert!(is_transient(Some("57014")));
        assert!(is_transient(Some("40001")), "a serialization failure");
        assert!(is_transient(Some("40P01")), "a deadlock");
        for code in [
            "08P01", "25006", "53300", "55000", "57P01", "57P02", "57P03", "57P05",
        ] {
            assert!(is_transient(Some(code)), "{code}");
        }
        assert!(
            !is_transient(Some("57P04")),
            "a dropped database stays gone"
        );
        assert!(
            !is_transient(Some("28P01")),
            "a refused password is not a retry"
        );
        assert!(!is_transient(Some("787")));
        assert!(!is_transient(Some("23503")));
        assert!(!is_transient(None));
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn transient_mysql_numbers() {
        use super::is_transient_mysql;
        for number in [1040, 1205, 1213, 1290, 1836, 1927, 1969, 2006, 2013, 4031] {
            assert!(is_transient_mysql(number), "{number}");
        }
        for number in [1062, 1064, 1146, 1452, 1701, 1045] {
            assert!(!is_transient_mysql(number), "{number}");
        }
    }
}
