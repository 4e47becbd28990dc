//! Idempotency keys' records in SQL: the statements over one table of them, and keeping
//! a record in a create's own transaction (the stores' `idempotency_keys` and a host's
//! [`KeyRecords`](crate::KeyRecords) alike).

use books_core::store::{BookRecord, IdempotencyKey, StoredAnswer};
use chrono::{DateTime, Utc};

use crate::driver::Driver;
use crate::statement::{Arg, Dialect, Statement};

/// The statements over one table of records.
#[derive(Debug, Clone)]
pub(crate) struct KeyStatements {
    /// A key's record, unless expired (`$2`: now).
    pub(crate) record: Statement,
    /// Keeps a key's record (the [`key_args`]): unless an unexpired one is there,
    /// returning the key if kept (SQLite, PostgreSQL); or failing as a duplicate if one
    /// is there at all (MariaDB: then [`forget`](Self::forget) and keep it again).
    pub(crate) keep: Statement,
    /// MariaDB: forgets the key of [`key_args`] if it expired (returning it if forgotten).
    pub(crate) forget: Option<Statement>,
    /// Forgets at most `$2` records expired at `$1`.
    pub(crate) forget_expired: Statement,
}

impl KeyStatements {
    /// Over `table` (a checked name, with its schema if any).
    pub(crate) fn new(dialect: Dialect, table: &str) -> Self {
        let mysql = dialect == Dialect::MySql;
        let sql = |text: String| Statement::new(&text, "", dialect);
        let key = if mysql { "`key`" } else { "key" };
        let columns = "fingerprint, status, content_type, location, etag, body";
        Self {
            record: sql(format!(
                "SELECT {columns} FROM {table} WHERE {key} = $1 AND expires_at > $2"
            )),
            keep: sql(format!(
                "INSERT INTO {table} {}({key}, {columns}, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8){}",
                if mysql { "" } else { "AS k " },
                if mysql {
                    ""
                } else {
                    " ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, \
                     status = excluded.status, content_type = excluded.content_type, \
                     location = excluded.location, etag = excluded.etag, body = excluded.body, \
                     expires_at = excluded.expires_at WHERE k.expires_at <= $9 RETURNING key"
                }
            )),
            forget: mysql.then(|| {
                sql(format!(
                    "DELETE FROM {table} WHERE `key` = $1 AND expires_at <= $9 RETURNING `key`"
                ))
            }),
            forget_expired: sql(if mysql {
                format!(
                    "DELETE FROM {table} WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 \
                     RETURNING `key`"
                )
            } else {
                format!(
                    "DELETE FROM {table} WHERE key IN (SELECT key FROM {table} \
                     WHERE expires_at <= $1 LIMIT $2) RETURNING key"
                )
            }),
        }
    }
}

/// In the write transaction on `conn` that wrote `book` for a create keyed by `key`:
/// keeps the key's record with the answer to `book`, unless an unexpired record for the
/// key is there (`false`: roll the book back).
pub(crate) async fn keep<DB: Driver>(
    conn: &mut DB::Connection,
    sql: &KeyStatements,
    persistent: bool,
    (key, book, now): (&IdempotencyKey, &BookRecord, DateTime<Utc>),
) -> Result<bool, sqlx::Error> {
    let answer = (key.answer)(book);
    let args = key_args(key, &answer, now);
    let Some(forget) = &sql.forget else {
        let kept = DB::rows(&mut *conn, &sql.keep, &args, persistent).await?;
        return Ok(!kept.is_empty());
    };
    // MariaDB: keep it; if one is there, forget it if it expired and keep again.
    match DB::rows(&mut *conn, &sql.keep, &args, persistent).await {
        Ok(_) => Ok(true),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            let forgotten = !DB::rows(&mut *conn, forget, &args, persistent)
                .await?
                .is_empty();
            if forgotten {
                DB::rows(&mut *conn, &sql.keep, &args, persistent).await?;
            }
            Ok(forgotten)
        }
        Err(e) => Err(e),
    }
}

/// The arguments that keep `key`'s record for the answer to `book` (`now`: records that
/// expired by then are replaced).
pub(crate) fn key_args<'a>(
    key: &'a IdempotencyKey,
    answer: &'a StoredAnswer,
    now: DateTime<Utc>,
) -> [Arg<'a>; 9] {
    [
        Arg::Text(&key.key),
        Arg::Blob(&key.fingerprint),
        Arg::Int4(i32::from(answer.status)),
        Arg::Text(&answer.content_type),
        Arg::Text(&answer.location),
        Arg::Text(&answer.etag),
        Arg::Blob(&answer.body),
        Arg::Time(key.expires_at),
        Arg::Time(now),
    ]
}
