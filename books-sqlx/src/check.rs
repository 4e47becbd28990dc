//! The version check's statement (the version, and the books' tally with it), and the
//! connection it runs on. The API's cache shares one check between the requests that
//! arrive together ([`SharedCheck`](books_core::store::SharedCheck)); this module only
//! runs it.
//!
//! sqlx 0.9 pings every connection handed back to a pool (one more round trip after
//! every query, on its own task). The check is exact mode's one query per wave of cached
//! reads, sent back to back under load, so a store that built its pool runs it on a
//! connection kept for it, opened with the pool's options on first use and again after a
//! failure. A store over a host's pool checks through that pool: the host may set its
//! connections up in `after_connect` (a role, a `search_path`, a key), which a
//! connection opened from the options alone would miss. docs/benchmark-history.md ("Exact mode")
//! measures the difference.

use std::time::Duration;

use books_core::store::{BooksTally, StoreError};
use futures_util::future::BoxFuture;
use sqlx::{
    AssertSqlSafe, ConnectOptions, Database, Encode, Executor, FromRow, IntoArguments, Pool,
    SqlSafeStr, SqlStr, Type,
};
use tokio::sync::Mutex;
use tokio::time::timeout;

use crate::error::OrStoreError;

/// The longest a check may take on its own connection, connecting included, before it
/// counts as unavailable (503) and its connection is dropped (a connection that went
/// silent never answers).
pub(crate) const CHECK_TIMEOUT: Duration = crate::ACQUIRE_TIMEOUT;

/// What a check read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked {
    /// The store's version.
    pub(crate) version: i64,
    /// The books' tally, read with the version.
    pub(crate) books: BooksTally,
}

/// The check's statement ([`check_sql`](crate::statements::check_sql)) with the id it counts
/// above and the previous version written in: parameters' placeholders, or the numbers.
pub(crate) type CheckSql = Box<dyn Fn(&str, &str) -> String + Send + Sync>;

/// A store's check, shared by its clones.
pub(crate) struct VersionCheck<DB: Database> {
    /// The statement, with its two parameters (the id it counts above, the previous
    /// version).
    sql: SqlStr,
    /// Sent with the simple protocol (a transaction pooler: no named statement), the
    /// numbers written into the statement.
    simple: Option<CheckSql>,
    /// Run on a connection of its own rather than through the pool.
    own: bool,
    connection: Mutex<CheckConnection<DB>>,
}

/// The check's own connection, and what the last check read.
struct CheckConnection<DB: Database> {
    conn: Option<DB::Connection>,
    last: Option<Checked>,
}

impl<DB: Database> std::fmt::Debug for VersionCheck<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionCheck")
            .field("own", &self.own)
            .field("simple", &self.simple.is_some())
            .finish_non_exhaustive()
    }
}

/// What a query on the check's connection is: it borrows nothing but the connection.
pub(crate) type OnConnection<T, DB> = Box<
    dyn for<'c> FnOnce(
            &'c mut <DB as Database>::Connection,
        ) -> BoxFuture<'c, Result<T, sqlx::Error>>
        + Send,
>;

impl<DB> VersionCheck<DB>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    CheckRow: for<'r> FromRow<'r, DB::Row>,
{
    /// A check that runs `sql` with `placeholders` for its parameters (or, if `simple`,
    /// the numbers written in), on a connection of its own if `own`.
    pub(crate) fn new(sql: CheckSql, placeholders: [&str; 2], simple: bool, own: bool) -> Self {
        Self {
            sql: AssertSqlSafe(sql(placeholders[0], placeholders[1])).into_sql_str(),
            simple: simple.then_some(sql),
            own,
            connection: Mutex::new(CheckConnection {
                conn: None,
                last: None,
            }),
        }
    }

    /// The version and the tally counting the books above `above` (`None`: above what the
    /// last check counted above, or `i64::MAX`), read now. When the version is still the
    /// last check's and that one counted above the same id, the statement reads no tally
    /// and the last one stands (the version moves with every write), which spares cached
    /// reads between writes two index scans per check.
    pub(crate) async fn tallied(
        &self,
        pool: &Pool<DB>,
        above: Option<i64>,
    ) -> Result<Checked, StoreError> {
        let mut slot = self.connection.lock().await;
        let above = above.unwrap_or_else(|| slot.last.map_or(i64::MAX, |last| last.books.above));
        let last = slot.last.filter(|last| last.books.above == above);
        let (version, changes, total, max_id, count_above) = {
            // No version is negative: -1 reads the tally whatever the version.
            let last_version = last.map_or(-1, |last| last.version);
            let statement = match &self.simple {
                Some(sql) => Statement::Simple(sql(&above.to_string(), &last_version.to_string())),
                None => Statement::Prepared(self.sql.clone(), above, last_version),
            };
            self.on_connection(&mut slot, pool, Box::new(move |conn| statement.fetch(conn)))
                .await?
        };
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let books = match (max_id, count_above, last) {
            (Some(max_id), Some(count_above), _) => BooksTally {
                changes: count(changes),
                total: count(total),
                max_id,
                above,
                count_above: count(count_above),
            },
            // Not read: the version is the last check's, and so is the tally.
            (_, _, Some(last)) if last.version == version => last.books,
            _ => return Err(StoreError::other("the check read no tally")),
        };
        let checked = Checked { version, books };
        slot.last = Some(checked);
        Ok(checked)
    }

    /// Runs `query` on the check's connection, between checks (see
    /// [`on_connection`](Self::on_connection)).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) async fn run<T>(
        &self,
        pool: &Pool<DB>,
        query: OnConnection<T, DB>,
    ) -> Result<T, StoreError> {
        let mut slot = self.connection.lock().await;
        self.on_connection(&mut slot, pool, query).await
    }

    /// Runs `query` on the check's connection: its own (opened like `pool`'s when there
    /// is none, dropped after any failure, so the next check starts on a fresh one; a
    /// closed pool closes it too), or one of `pool`'s.
    async fn on_connection<T>(
        &self,
        slot: &mut CheckConnection<DB>,
        pool: &Pool<DB>,
        query: OnConnection<T, DB>,
    ) -> Result<T, StoreError> {
        if !self.own {
            let mut conn = pool.acquire().await.or_store_error()?;
            return query(&mut conn).await.or_store_error();
        }
        if pool.is_closed() {
            slot.conn = None;
            return Err(sqlx::Error::PoolClosed).or_store_error();
        }
        let outcome = timeout(CHECK_TIMEOUT, async {
            if slot.conn.is_none() {
                slot.conn = Some(pool.connect_options().connect().await?);
            }
            query(slot.conn.as_mut().expect("opened above")).await
        })
        .await;
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                slot.conn = None;
                Err(error).or_store_error()
            }
            Err(elapsed) => {
                slot.conn = None;
                Err(StoreError::unavailable(elapsed))
            }
        }
    }
}

/// The check's row: the version, `changes`, the total, and (unless the version is the
/// last check's) the greatest id and the count above the id asked about.
type CheckRow = (i64, i64, i64, Option<i64>, Option<i64>);

/// The check's statement as sent: prepared with its two arguments, or simple.
enum Statement {
    Prepared(SqlStr, i64, i64),
    Simple(String),
}

impl Statement {
    fn fetch<'c, DB>(
        self,
        conn: &'c mut DB::Connection,
    ) -> BoxFuture<'c, Result<CheckRow, sqlx::Error>>
    where
        DB: Database,
        for<'e> &'e mut DB::Connection: Executor<'e, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        for<'q> i64: Encode<'q, DB> + Type<DB>,
        CheckRow: for<'r> FromRow<'r, DB::Row>,
    {
        Box::pin(async move {
            let row = match self {
                Self::Simple(sql) => {
                    sqlx::raw_sql(AssertSqlSafe(sql).into_sql_str())
                        .fetch_one(conn)
                        .await?
                }
                Self::Prepared(sql, above, last) => {
                    sqlx::query(sql)
                        .bind(above)
                        .bind(last)
                        .fetch_one(conn)
                        .await?
                }
            };
            FromRow::from_row(&row)
        })
    }
}
