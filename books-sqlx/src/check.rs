//! The version check: the store's version (and, with replicas, the primary's WAL
//! position), read by a query sent after the caller asked, shared by every caller that
//! asked before it was sent.
//!
//! sqlx 0.9 pings every connection handed back to a pool (one more round trip after
//! every query, on its own task). The check is exact mode's one query per wave of cached
//! reads, sent back to back under load, so a store that built its pool runs it on a
//! connection kept for it, opened with the pool's options on first use and again after a
//! failure. A store over a host's pool checks through that pool: the host may set its
//! connections up in `after_connect` (a role, a `search_path`, a key), which a
//! connection opened from the options alone would miss. BENCHMARKS.md ("Exact mode: a
//! check per wave of requests") measures the difference.
//!
//! Sharing: a caller may take the answer of a check that *started* after it asked (so
//! the answer is at least as new as anything acknowledged before it asked); otherwise it
//! waits its turn and sends one, which every caller queued behind it then shares.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use books_core::{BooksTally, StoreError, VersionReading};
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
    /// The primary's WAL position (PostgreSQL with replicas), in bytes.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) position: Option<i64>,
}

impl Checked {
    /// As the API's cache takes it.
    pub(crate) fn reading(&self) -> VersionReading {
        VersionReading {
            version: self.version as u64,
            books: Some(self.books),
        }
    }
}

/// The check's statement ([`check_sql`](crate::rows::check_sql)) with the id it counts
/// above and the previous version written in: parameters' placeholders, or the numbers.
pub(crate) type CheckSql = Box<dyn Fn(&str, &str) -> String + Send + Sync>;

/// A store's check, shared by its clones.
pub(crate) struct Check<DB: Database> {
    /// The statement, with its two parameters (the id it counts above, the previous
    /// version).
    sql: SqlStr,
    /// Sent with the simple protocol (a transaction pooler: no named statement), the
    /// number written into the statement.
    simple: Option<CheckSql>,
    /// The id the last check counted above: what a check asked for by a caller with no
    /// id of its own counts above (so it serves the cache's callers too).
    above: AtomicI64,
    /// Run on a connection of its own rather than through the pool.
    own: bool,
    /// How many checks were started.
    started: AtomicU64,
    slot: Mutex<Slot<DB>>,
}

struct Slot<DB: Database> {
    conn: Option<DB::Connection>,
    /// The newest check that succeeded: its number and what it read.
    last: Option<(u64, Checked)>,
}

impl<DB: Database> std::fmt::Debug for Check<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("own", &self.own)
            .field("simple", &self.simple.is_some())
            .finish_non_exhaustive()
    }
}

impl<DB> Check<DB>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    (i64, i64, i64, Option<i64>, Option<i64>, Option<i64>): for<'r> FromRow<'r, DB::Row>,
{
    /// A check that runs `sql` with `placeholders` for its parameters (or, if `simple`,
    /// the numbers written in), on a connection of its own if `own`.
    pub(crate) fn new(sql: CheckSql, placeholders: [&str; 2], simple: bool, own: bool) -> Self {
        Self {
            sql: AssertSqlSafe(sql(placeholders[0], placeholders[1])).into_sql_str(),
            simple: simple.then_some(sql),
            above: AtomicI64::new(i64::MAX),
            own,
            started: AtomicU64::new(0),
            slot: Mutex::new(Slot {
                conn: None,
                last: None,
            }),
        }
    }

    /// What a check sent after this call reads (see the module's doc). The own
    /// connection is opened like `pool`'s when there is none; any failure drops it, so
    /// the next check starts on a fresh one, and a closed pool closes it too.
    ///
    /// It counts the books above `above`, or with `None`, above what the last check did.
    pub(crate) async fn run(
        &self,
        pool: &Pool<DB>,
        above: Option<i64>,
    ) -> Result<Checked, StoreError> {
        if let Some(above) = above {
            self.above.store(above, Ordering::Relaxed);
        }
        let asked = self.started.load(Ordering::SeqCst);
        let mut slot = self.slot.lock().await;
        if let Some((number, checked)) = slot.last
            && number > asked
        {
            return Ok(checked);
        }
        let number = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let above = self.above.load(Ordering::Relaxed);
        // The tally the last check read, if it counted above the same id: unchanged while
        // the version is.
        let last = slot
            .last
            .map(|(_, last)| last)
            .filter(|last| last.books.above == above);
        let checked = if self.own {
            self.on_own_connection(&mut slot, pool, above, last).await
        } else {
            self.fetch(pool, above, last).await.or_store_error()
        };
        if let Ok(checked) = checked {
            slot.last = Some((number, checked));
        }
        checked
    }

    async fn on_own_connection(
        &self,
        slot: &mut Slot<DB>,
        pool: &Pool<DB>,
        above: i64,
        last: Option<Checked>,
    ) -> Result<Checked, StoreError> {
        if pool.is_closed() {
            slot.conn = None;
            return Err(sqlx::Error::PoolClosed).or_store_error();
        }
        let checked = timeout(CHECK_TIMEOUT, async {
            if slot.conn.is_none() {
                slot.conn = Some(pool.connect_options().connect().await?);
            }
            let conn = slot.conn.as_mut().expect("opened above");
            self.fetch(conn, above, last).await
        })
        .await;
        match checked {
            Ok(Ok(checked)) => Ok(checked),
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

    /// Runs the check's statement on `executor`; with `last` (a check that counted above
    /// `above` too), the tally is read only if the version moved since it.
    async fn fetch<'e, E>(
        &self,
        executor: E,
        above: i64,
        last: Option<Checked>,
    ) -> Result<Checked, sqlx::Error>
    where
        E: Executor<'e, Database = DB>,
    {
        // No version is negative: -1 reads the tally whatever the version.
        let last_version = last.map_or(-1, |last| last.version);
        let row = match &self.simple {
            Some(sql) => {
                let sql = sql(&above.to_string(), &last_version.to_string());
                sqlx::raw_sql(AssertSqlSafe(sql).into_sql_str())
                    .fetch_one(executor)
                    .await?
            }
            None => {
                sqlx::query(self.sql.clone())
                    .bind(above)
                    .bind(last_version)
                    .fetch_one(executor)
                    .await?
            }
        };
        let (version, changes, total, max_id, count_above, position) =
            <(i64, i64, i64, Option<i64>, Option<i64>, Option<i64>)>::from_row(&row)?;
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
            _ => return Err(sqlx::Error::Protocol("the check read no tally".into())),
        };
        Ok(Checked {
            version,
            books,
            position,
        })
    }
}
