//! Errors of setting a store up, and how driver errors map to [`StoreError`].

use std::sync::Arc;

use books_core::StoreError;

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
    /// A PostgreSQL schema name this store does not accept.
    #[error("invalid schema name {0:?}: use 1 to 63 of a-z, 0-9 and _, not starting with a digit")]
    InvalidSchema(String),
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

fn store_error(error: sqlx::Error, author_id: Option<i64>) -> StoreError {
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

/// Whether the database could not be reached or timed out (503, worth a retry).
pub(crate) fn is_unavailable(error: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match error {
        E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::WorkerCrashed => true,
        E::Database(db) => is_transient(db.code().as_deref()),
        _ => false,
    }
}

/// One driver error that failed several requests at once (a batch of creates).
#[derive(Debug, thiserror::Error)]
#[error("a write of several books failed")]
pub(crate) struct Shared(#[source] pub(crate) Arc<sqlx::Error>);

/// SQLite busy/locked; PostgreSQL's and PgBouncer's "try again later".
fn is_transient(code: Option<&str>) -> bool {
    match code {
        // PostgreSQL SQLSTATE (five characters): connection exceptions (class 08, which
        // is also what PgBouncer sends for its own pool and login failures), read-only
        // transaction (a primary that became a standby), too many connections and
        // configuration limits, object not in prerequisite state (a database not
        // accepting connections, WAL functions during recovery), statement timeout,
        // admin/crash shutdown, cannot connect now, idle-session timeout.
        Some(code) if code.len() == 5 => {
            code.starts_with("08")
                || matches!(
                    code,
                    "25006"
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
}
