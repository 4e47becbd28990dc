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
//! `scripts/load.py --pooler` measures what that costs.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgRow, Postgres};
use sqlx::{AssertSqlSafe, Transaction};

use crate::STATEMENT_TIMEOUT;
use crate::statement::{Arg, Statement};

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

    /// Runs a statement: directly, prepared and kept; behind a pooler, a `read` in one
    /// message when its arguments can be written in, anything else in a transaction of
    /// its own.
    pub(crate) async fn run(
        self,
        pool: &PgPool,
        statement: &Statement,
        args: &[Arg<'_>],
        read: bool,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        if !self.pooler {
            return statement.query(args).fetch_all(pool).await;
        }
        if let (true, Ok(inlined)) = (read, statement.inline(args)) {
            let text = format!("{}; {inlined}", local_settings());
            return bounded(sqlx::raw_sql(AssertSqlSafe(text)).fetch_all(pool)).await;
        }
        bounded(async {
            let mut tx = self.begin(pool).await?;
            let rows = statement
                .query(args)
                .persistent(false)
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
