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
//! connection opened from the options alone would miss. (`scripts/load.py --cache
//! --stores postgres` measures exact mode's cost per cached answer.)

use std::sync::Arc;
use std::time::Duration;

use books_core::store::{BooksTally, StoreError, Version};
use futures_util::future::BoxFuture;
use sqlx::{ConnectOptions, Pool};
use tokio::sync::Mutex;
use tokio::time::timeout;

use crate::driver::Driver;
use crate::error::OrStoreError;
use crate::lineage::{Lineage, POSITION_SQL, Position};
use crate::rows::StoreRow;
use crate::statement::{Arg, Dialect, Statement};

/// The longest a check may take on its own connection, connecting included, before it
/// counts as unavailable (503) and its connection is dropped (a connection that went
/// silent never answers).
pub(crate) const CHECK_TIMEOUT: Duration = crate::ACQUIRE_TIMEOUT;

/// What a check read.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    /// The store's version.
    pub(crate) version: Version,
    /// The books' tally, read with the version.
    pub(crate) books: BooksTally,
    /// Whether the tally and history were read (not the last check's).
    fresh: bool,
}

/// The check's statement for tables behind `schema` (`$1`: the id the tally counts
/// above, `$2`: the previous check's count): in one snapshot the version's count,
/// `changes`, the total, and — unless the count is still the previous check's, which
/// spares cached reads between writes two index scans and a look-up per check — the
/// greatest id, how many books have an id greater than `$1`, the history and, on
/// PostgreSQL, its [`Position`]. The count is bounded above by the greatest id too,
/// which selects nothing more but gives the planner a closed range: PostgreSQL guesses a
/// third of a table for `id > $1` on a table not yet analyzed (a burst of creates before
/// autovacuum's first `ANALYZE`, or autovacuum off) and scanned all of it, 23 ms at
/// 344,000 books against 0.25 ms through the index.
fn check_sql(dialect: Dialect) -> String {
    let history = history_sql(dialect);
    let position = match dialect {
        Dialect::Postgres => POSITION_SQL
            .iter()
            .map(|column| format!(", CASE WHEN v = $2 THEN NULL ELSE {column} END"))
            .collect(),
        _ => String::new(),
    };
    format!(
        "SELECT v, c, n, \
         CASE WHEN v = $2 THEN NULL ELSE (SELECT COALESCE(MAX(id), 0) FROM {{s}}books) END, \
         CASE WHEN v = $2 THEN NULL ELSE (SELECT COUNT(*) FROM {{s}}books WHERE id > $1 \
         AND id <= (SELECT MAX(id) FROM {{s}}books)) END, \
         CASE WHEN v = $2 THEN NULL ELSE {history} END{position} \
         FROM (SELECT CAST(SUM(version) AS {{int8}}) AS v, CAST(SUM(changes) AS {{int8}}) AS c, \
         CAST(SUM(n) AS {{int8}}) AS n FROM {{s}}book_count) t"
    )
}

/// The database's history as a `BIGINT` expression, for the counters in `{s}book_count`
/// (`{db}`: MariaDB's database of them as a string literal, or `NULL` for the
/// connection's).
pub(crate) fn history_sql(dialect: Dialect) -> &'static str {
    match dialect {
        // The timeline (a promoted standby starts a new one) and the counter table's
        // file (a restore, or a database created again, writes a new one).
        Dialect::Postgres => {
            "hashtextextended(substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' \
             || pg_relation_filenode('{s}book_count')::text, 0)"
        }
        // The server (a promoted replica, another Galera node) and when the counter table
        // was created (a restore, a database created again).
        Dialect::MySql => {
            "CAST(CONV(LEFT(MD5(CONCAT(@@server_id, '/', COALESCE((SELECT CREATE_TIME \
             FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE({db}, DATABASE()) \
             AND TABLE_NAME = 'book_count'), ''))), 15), 16, 10) AS SIGNED)"
        }
        // One file, which nothing replaces under a running store (docs/stores.md).
        Dialect::Sqlite => "0",
    }
}

/// What `{db}` stands for in [`history_sql`]: MariaDB's `database` as a string literal, or
/// `NULL` for the connection's.
pub(crate) fn database_literal(database: Option<&str>) -> String {
    database.map_or("NULL".to_owned(), |name| format!("'{name}'"))
}

/// How many times a pool switched hosts (a failover): a connection opened at an older
/// generation is of the host before, and dropped before its next use.
#[derive(Debug, Default)]
pub struct Generation(std::sync::atomic::AtomicU64);

impl Generation {
    /// The generation now.
    pub(crate) fn now(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The next generation.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn advance(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A store's check, shared by its clones.
pub struct VersionCheck<DB: Driver> {
    statement: Statement,
    /// Sent as text (a transaction pooler: no named statement), after this.
    simple: Option<String>,
    /// Run on a connection of its own rather than through the pool.
    own: bool,
    /// The pool's switches of host: the own connection, opened at another, is dropped.
    generation: Option<Arc<Generation>>,
    /// The history told, across lossless promotions (PostgreSQL).
    lineage: Arc<Lineage>,
    connection: Mutex<CheckConnection<DB>>,
    /// SQLite's WAL index, which tells when nothing was committed since the last check.
    #[cfg(all(target_os = "linux", feature = "sqlite"))]
    wal_index: Option<crate::wal_index::WalIndex>,
}

/// The check's own connection (and the generation it was opened at), and what the last
/// check read.
struct CheckConnection<DB: Driver> {
    conn: Option<(DB::Connection, u64)>,
    last: Option<Checked>,
}

impl<DB: Driver> std::fmt::Debug for VersionCheck<DB> {
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
            &'c mut <DB as sqlx::Database>::Connection,
        ) -> BoxFuture<'c, Result<T, sqlx::Error>>
        + Send,
>;

impl<DB: Driver> VersionCheck<DB> {
    /// The check of the tables behind `schema` (`""`, or a checked name and a dot) in
    /// `dialect` (`database`: MariaDB's database of the tables as a string literal, or
    /// `NULL` for the connection's); sent as text after `simple` if given; on a connection
    /// of its own if `own`.
    pub(crate) fn new(
        dialect: Dialect,
        schema: &str,
        database: &str,
        simple: Option<String>,
        own: Option<Option<Arc<Generation>>>,
    ) -> Self {
        let sql = check_sql(dialect).replace("{db}", database);
        Self {
            statement: Statement::new(&sql, schema, dialect),
            simple,
            own: own.is_some(),
            generation: own.flatten(),
            lineage: Arc::default(),
            connection: Mutex::new(CheckConnection {
                conn: None,
                last: None,
            }),
            #[cfg(all(target_os = "linux", feature = "sqlite"))]
            wal_index: None,
        }
    }

    /// This check knowing the version while `index` stands still (a SQLite file the
    /// store opened, checked on a connection of its own).
    #[cfg(all(target_os = "linux", feature = "sqlite"))]
    pub(crate) fn with_wal_index(self, index: crate::wal_index::WalIndex) -> Self {
        Self {
            wal_index: Some(index),
            ..self
        }
    }

    /// The version the last check read, while the database tells that nothing was
    /// committed since (SQLite's WAL index); else `None`.
    pub(crate) fn known(&self) -> Option<Version> {
        #[cfg(all(target_os = "linux", feature = "sqlite"))]
        if let Some(index) = &self.wal_index {
            return index.known();
        }
        None
    }

    /// The version and the tally counting the books above `above` (`None`: above what the
    /// last check counted above, or `i64::MAX`), read now. When the count is still the
    /// last check's and that one counted above the same id, the statement reads no tally
    /// nor history and the last ones stand (the count moves with every write).
    pub(crate) async fn tallied(
        &self,
        pool: &Pool<DB>,
        above: Option<i64>,
    ) -> Result<Checked, StoreError> {
        let mut slot = self.connection.lock().await;
        let above = above.unwrap_or_else(|| slot.last.map_or(i64::MAX, |last| last.books.above));
        let last = slot.last.filter(|last| last.books.above == above);
        // No count is negative: -1 reads everything whatever the count.
        let last_count = last.map_or(-1, |last| last.version.count as i64);
        let args = [Arg::Int(above), Arg::Int(last_count)];
        let text = match &self.simple {
            Some(before) => Some(format!(
                "{before}; {}",
                self.statement.inline(&args).or_store_error()?
            )),
            None => None,
        };
        let statement = self.statement.clone();
        let reads = self.lineage.reads();
        #[cfg(all(target_os = "linux", feature = "sqlite"))]
        let seen = self
            .wal_index
            .as_ref()
            .and_then(|index| index.before_check());
        let rows = self
            .on_connection(
                &mut slot,
                pool,
                Box::new(move |conn| {
                    Box::pin(async move {
                        match text {
                            Some(text) => DB::text_rows(conn, text).await,
                            None => DB::rows(conn, &statement, &args, true).await,
                        }
                    })
                }),
            )
            .await?;
        let row = rows
            .last()
            .ok_or_else(|| StoreError::other("the check read no row"))?;
        let mut checked = read_checked(row, above, last).or_store_error()?;
        if checked.fresh {
            // PostgreSQL's position follows the six columns every database reads.
            let at = (sqlx::Row::len(row) > 6).then(|| Position::read(row, 6));
            let at = at.transpose().or_store_error()?;
            let (history, count) = (checked.version.history, checked.version.count);
            checked.version.history = self.lineage.tell(history, at, count, reads);
        }
        #[cfg(all(target_os = "linux", feature = "sqlite"))]
        if let (Some(index), Some(seen)) = (&self.wal_index, seen) {
            index.after_check(seen, checked.version);
        }
        slot.last = Some(checked);
        Ok(checked)
    }

    /// This check telling the history `lineage` follows (shared with the store's push
    /// listener and kept when the store is rebuilt).
    #[cfg(feature = "postgres")]
    pub(crate) fn with_lineage(self, lineage: Arc<Lineage>) -> Self {
        Self { lineage, ..self }
    }

    /// The history this check tells, which the store's data reads report to.
    pub(crate) fn lineage(&self) -> &Lineage {
        &self.lineage
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
            self.drop_connection(slot);
            return Err(sqlx::Error::PoolClosed).or_store_error();
        }
        let generation = self.generation.as_ref().map_or(0, |g| g.now());
        if slot.conn.as_ref().is_some_and(|(_, at)| *at != generation) {
            // Opened to the host before the pool's last switch.
            self.drop_connection(slot);
        }
        let outcome = timeout(CHECK_TIMEOUT, async {
            if slot.conn.is_none() {
                slot.conn = Some((pool.connect_options().connect().await?, generation));
            }
            query(&mut slot.conn.as_mut().expect("opened above").0).await
        })
        .await;
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                self.drop_connection(slot);
                Err(error).or_store_error()
            }
            Err(_) => {
                // An I/O error, as a silent host is: the store looks for it again.
                self.drop_connection(slot);
                let silent = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the version check did not finish in time",
                );
                Err(sqlx::Error::Io(silent)).or_store_error()
            }
        }
    }

    /// Drops the check's own connection, and with it what the WAL index trusted.
    fn drop_connection(&self, slot: &mut CheckConnection<DB>) {
        slot.conn = None;
        #[cfg(all(target_os = "linux", feature = "sqlite"))]
        if let Some(index) = &self.wal_index {
            index.forget();
        }
    }
}

/// A check's row: the count, `changes`, the total, and (unless the count is the last
/// check's) the greatest id, the count above the id asked about, and the history.
fn read_checked<R: StoreRow>(
    row: &R,
    above: i64,
    last: Option<Checked>,
) -> Result<Checked, sqlx::Error> {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let (version, changes, total) = (row.int(0)?, row.int(1)?, row.int(2)?);
    let read = (row.maybe_int(3)?, row.maybe_int(4)?, row.maybe_int(5)?);
    Ok(match (read, last) {
        ((Some(max_id), Some(count_above), Some(history)), _) => Checked {
            version: Version::new(history as u64, count(version)),
            books: BooksTally {
                changes: count(changes),
                total: count(total),
                max_id,
                above,
                count_above: count(count_above),
            },
            fresh: true,
        },
        // Not read: the count is the last check's, and so are the tally and history.
        (_, Some(last)) if last.version.count == count(version) => Checked {
            fresh: false,
            ..last
        },
        _ => return Err(sqlx::Error::Protocol("the check read no tally".into())),
    })
}
