//! How the PostgreSQL store sends a statement: straight to the database, or through a
//! transaction-mode connection pooler (PgBouncer), which hands each transaction to any
//! of its server connections.
//!
//! Direct, a statement is prepared once per connection and kept (one round trip per
//! use), and the session settings (the statement time bound) are set once per
//! connection. Behind a pooler neither survives the transaction: a named statement
//! would land on another client's server connection ("prepared statement sqlx_s_1
//! already exists"), a session setting would leak to other clients, and sqlx sends a
//! statement's parse and its execution as two round trips, which the pooler may hand to
//! two different server connections. So there:
//!
//! - a read is one simple-protocol message, `SET LOCAL statement_timeout …;` and the
//!   statement with its integer arguments written in (reads take only integers), run
//!   as one implicit transaction: one round trip, nothing left behind;
//! - a write runs in a transaction begun with the same `SET LOCAL`, its statements
//!   unnamed (`persistent(false)`): four round trips (begin, parse, execute, commit).
//!
//! BENCHMARKS.md ("Behind a transaction pooler") measures what that costs.

use std::fmt::Write as _;
use std::future::Future;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgRow, Postgres};
use sqlx::{AssertSqlSafe, SqlStr, Transaction};

use crate::STATEMENT_TIMEOUT;
use crate::queries::{Arg, bind};

/// The session setting the store's own direct connections get once
/// ([`PostgresStore::options`](crate::PostgresStore::options)).
pub(crate) fn session_settings() -> String {
    format!("SET statement_timeout = {}", STATEMENT_TIMEOUT.as_millis())
}

/// The same, for one transaction.
pub(crate) fn local_settings() -> String {
    format!(
        "SET LOCAL statement_timeout = {}",
        STATEMENT_TIMEOUT.as_millis()
    )
}

/// How long a statement sent through a pooler may take before the store gives up on it
/// (503): the database's bound and a second for the way there and back. A pooler queues
/// a transaction while it has no server connection to give it, which no statement
/// timeout bounds.
const POOLED_TIMEOUT: Duration = STATEMENT_TIMEOUT.saturating_add(Duration::from_secs(1));

/// Direct or through a transaction pooler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) pooler: bool,
}

impl Session {
    /// Whether statements may be prepared and kept on the connection.
    pub(crate) fn persistent(self) -> bool {
        !self.pooler
    }

    /// Runs a read (behind a pooler: in one message when its arguments are integers,
    /// else in a transaction of its own).
    pub(crate) async fn read(
        self,
        pool: &PgPool,
        sql: &SqlStr,
        args: &[Arg<'_>],
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        if !self.pooler {
            return bind(sqlx::query(sql.clone()), args).fetch_all(pool).await;
        }
        if !args.iter().all(|arg| matches!(arg, Arg::Int(_))) {
            // Text cannot be written in: an unnamed statement in a transaction.
            return self.write(pool, sql, args).await;
        }
        let text = format!("{}; {}", local_settings(), inline(sql.as_str(), args)?);
        bounded(sqlx::raw_sql(AssertSqlSafe(text)).fetch_all(pool)).await
    }

    /// Runs a write, in a transaction of its own behind a pooler.
    pub(crate) async fn write(
        self,
        pool: &PgPool,
        sql: &SqlStr,
        args: &[Arg<'_>],
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        if !self.pooler {
            return bind(sqlx::query(sql.clone()), args).fetch_all(pool).await;
        }
        bounded(async {
            let mut tx = self.begin(pool).await?;
            let rows = bind(sqlx::query(sql.clone()).persistent(false), args)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(rows)
        })
        .await
    }

    /// A transaction, with the session settings in it behind a pooler.
    pub(crate) async fn begin(
        self,
        pool: &PgPool,
    ) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        if self.pooler {
            pool.begin_with(AssertSqlSafe(format!("BEGIN; {}", local_settings())))
                .await
        } else {
            pool.begin().await
        }
    }

    /// `work` within the pooler's bound, if there is a pooler.
    pub(crate) async fn bounded<T>(
        self,
        work: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        if self.pooler {
            bounded(work).await
        } else {
            work.await
        }
    }
}

async fn bounded<T>(work: impl Future<Output = Result<T, sqlx::Error>>) -> Result<T, sqlx::Error> {
    tokio::time::timeout(POOLED_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| {
            Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer through the connection pooler in time",
            )))
        })
}

/// `sql` with each `$N` replaced by the `N`th argument, written as a decimal literal.
/// Only integers are written in (nothing a client sends reaches the text but as digits
/// and a sign); any other argument is an error.
pub(crate) fn inline(sql: &str, args: &[Arg<'_>]) -> Result<String, sqlx::Error> {
    let mut text = String::with_capacity(sql.len() + 16 * args.len());
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - at - 1);
        let number: usize = rest[at + 1..at + 1 + digits]
            .parse()
            .map_err(|_| sqlx::Error::Protocol(format!("a lone `$` in {sql:?}")))?;
        match number.checked_sub(1).and_then(|index| args.get(index)) {
            Some(Arg::Int(value)) => write!(text, "{value}").expect("writing to a String"),
            _ => {
                return Err(sqlx::Error::Protocol(format!(
                    "argument ${number} of {sql:?} cannot be written in"
                )));
            }
        }
        rest = &rest[at + 1 + digits..];
    }
    text.push_str(rest);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_in_by_number() {
        let args: Vec<Arg> = (1..=11).map(|n| Arg::Int(n * 100)).collect();
        assert_eq!(
            inline("LIMIT $1 OFFSET $2 WHERE x > $11 - $2", &args).unwrap(),
            "LIMIT 100 OFFSET 200 WHERE x > 1100 - 200"
        );
        assert_eq!(
            inline("id = $1", &[Arg::Int(-7)]).unwrap(),
            "id = -7",
            "a sign and digits only"
        );
        assert_eq!(inline("SELECT 1", &[]).unwrap(), "SELECT 1");
    }

    #[test]
    fn nothing_but_integers_is_written_in() {
        assert!(inline("title = $1", &[Arg::Text("'; DROP TABLE books; --")]).is_err());
        assert!(inline("id = $2", &[Arg::Int(1)]).is_err(), "missing");
        assert!(inline("id = $0", &[Arg::Int(1)]).is_err(), "no $0");
        assert!(inline("cost $", &[]).is_err(), "a lone $");
    }
}
