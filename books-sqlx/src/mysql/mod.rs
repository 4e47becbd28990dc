//! The MariaDB store: a pool with lazy connections and a statement time bound, GTID
//! replicas behind it ([`replicas`]), deadlocks and certification conflicts sent again.

mod replicas;

use std::str::FromStr;

use books_core::store::StoreError;
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlConnection, MySqlPoolOptions, MySqlRow};
use sqlx::pool::PoolOptions;
use sqlx::{AssertSqlSafe, Executor, Row, Transaction};

use crate::backend::Read;
use crate::backend::SqlStore;
use crate::backend::{Backend, Engine};
use crate::batch::{self, NewBook};
use crate::check::VersionCheck;
use crate::driver::Driver;
use crate::error::OrStoreError;
use crate::retry::retry_conflicts;
use crate::servers::{Networked, Role, Servers, base_pool_options};
use crate::statement::{Arg, Dialect, Statement};
use crate::store::checked_name;
use crate::{ACQUIRE_TIMEOUT, Error, STATEMENT_TIMEOUT, migrate};

/// A MariaDB store (10.6 or later; feature `mysql`). Cloning is cheap (the pool is shared).
///
/// Built from a URL (`mysql://user:password@host/db`, or `mariadb://…`:
/// [`connect_lazy`](SqlStore::connect_lazy), [`connect`](SqlStore::connect)) or over a
/// pool the host has ([`from_pool`](SqlStore::from_pool)). Connections are opened lazily
/// by `connect_lazy`: a store built while the server is down answers "unavailable" (503)
/// and recovers by itself once the server is back. Every tier of the other SQL stores:
/// exact cached reads across processes (triggers keep the version, whoever writes),
/// conditional writes under row locks, idempotent creates, creates committed together,
/// and reads from GTID replicas ([`with_replicas`](SqlStore::with_replicas)) never older
/// than the primary. Each connection it opens is in UTC and `utf8mb4` (sqlx's defaults)
/// with a statement time bound of [`STATEMENT_TIMEOUT`] and as long at most for a row
/// lock. MariaDB has no `LISTEN`/`NOTIFY`: there is no push mode, every cached read is
/// checked. MySQL (no `RETURNING`) is not supported: docs/stores.md says what differs.
pub type MySqlStore = SqlStore<MySql>;

impl Backend for MySql {}

impl Engine for MySql {
    type Servers = Servers<MySql>;
    type Extra = ();
    const DIALECT: Dialect = Dialect::MySql;
    const MIGRATIONS: &'static [(&'static str, &'static str)] = migrate::MYSQL;

    /// For data reads, a replica that has caught up ([`crate::servers`]).
    async fn read(
        store: &MySqlStore,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<MySqlRow>, StoreError> {
        let pool = &store.servers.pool;
        Servers::read(store, to, statement, args, || async {
            let mut conn = pool.acquire().await.or_store_error()?;
            let rows = MySql::rows(&mut conn, statement, args, true).await;
            if rows.is_err() {
                // A deep page's procedure that failed may have left its read-only
                // transaction open: the connection goes, and its snapshot with it.
                conn.close_on_drop();
            }
            rows.or_store_error()
        })
        .await
    }

    /// A deadlock rolled the write back whole: it is sent once more.
    async fn write(
        store: &MySqlStore,
        statement: &Statement,
        then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<MySqlRow>, sqlx::Error> {
        Self::retried(store, || async {
            let Some(then) = then else {
                let mut conn = store.servers.pool.acquire().await?;
                return MySql::rows(&mut conn, statement, args, true).await;
            };
            let mut tx = store.servers.pool.begin().await?;
            MySql::rows(&mut tx, statement, args, true).await?;
            let rows = MySql::rows(&mut tx, then, args, true).await?;
            tx.commit().await?;
            Ok(rows)
        })
        .await
    }

    async fn ready(store: &MySqlStore) -> Result<(), StoreError> {
        Servers::ready(store).await
    }

    async fn begin(store: &MySqlStore) -> Result<Transaction<'static, MySql>, sqlx::Error> {
        store.servers.pool.begin().await
    }

    /// A transaction that deadlocked (or, on Galera, lost a certification conflict at
    /// commit: 1213 too, "retry the transaction") is rolled back whole, so sending it again
    /// is safe: [`retry_conflicts`] before it counts as unavailable.
    async fn retried<T, F, Fut>(store: &MySqlStore, work: F) -> Result<T, sqlx::Error>
    where
        T: Send,
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, sqlx::Error>> + Send,
    {
        store.servers.primary(retry_conflicts(work)).await
    }

    /// One statement (the books as a JSON array, `JSON_TABLE`): one round trip for the
    /// books, where one insert each would take a round trip each on the one writing task.
    /// Then one call counts them all (the rows are marked so that the insert trigger,
    /// which runs once per row, leaves them to it: migration 0002).
    async fn insert_many(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        books: &[NewBook],
    ) -> Result<Vec<MySqlRow>, sqlx::Error> {
        let json = batch::as_json(books, datetime_6);
        let books = &store.sql.books;
        let rows = MySql::rows(conn, &books.create_many, &[Arg::Text(&json)], true).await?;
        if let (Some(count), false) = (&books.count_created, rows.is_empty()) {
            let ids = rows
                .iter()
                .map(|row| row.try_get::<i64, _>("id").map(|id| id.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            let ids = format!("[{}]", ids.join(","));
            MySql::rows(conn, count, &[Arg::Text(&ids)], true).await?;
        }
        Ok(rows)
    }

    /// MariaDB's DDL is not transactional: a migration cut in half is run again in full
    /// at the next start, every statement of it written to be repeated.
    async fn migrate(store: &MySqlStore) -> Result<(), Error> {
        // On the primary, whichever host of the URL it is now.
        store.wait_for_primary(std::time::Duration::ZERO).await?;
        let pool = &store.servers.pool;
        let mut options = (*pool.connect_options()).clone();
        if let Some(database) = &store.schema {
            // A checked identifier: nothing to inject.
            sqlx::raw_sql(AssertSqlSafe(format!(
                "CREATE DATABASE IF NOT EXISTS {database}"
            )))
            .execute(pool)
            .await?;
            options = options.database(database);
        }
        // One connection of its own, which holds the lock while migrating.
        let own = MySqlPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        let migrated = migrate::mysql::run(&own, MySqlStore::migrator()).await;
        own.close().await;
        migrated
    }

    fn version_check(
        servers: &Servers<MySql>,
        _extra: &(),
        prefix: &str,
        schema: Option<&str>,
    ) -> VersionCheck<MySql> {
        let database = crate::check::database_literal(schema);
        let own = servers.own.then(|| servers.generation());
        VersionCheck::new(Dialect::MySql, prefix, &database, None, own)
    }
}

impl Networked for MySql {
    const POOL_NAME: &'static str = "mysql";
    const SYSTEM: &'static str = "mariadb";
    const NO_WAIT: &'static str = "SET STATEMENT wsrep_sync_wait = 0 FOR ";

    /// `mysql://…` or `mariadb://…`.
    fn parse(url: &str) -> Result<MySqlConnectOptions, Error> {
        let url = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        Ok(MySqlConnectOptions::from_str(&url)?)
    }

    fn address(options: &MySqlConnectOptions) -> String {
        match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        }
    }

    /// Writable: not read-only and, on Galera, ready and `Synced` (in the primary
    /// component, not donating or joining); a replica: read-only.
    /// One text-protocol query (no statement prepared for a probe made once), without
    /// the causality wait the store's sessions have on Galera.
    async fn role(conn: &mut MySqlConnection) -> Result<Role, sqlx::Error> {
        let row = sqlx::raw_sql(
            "SET STATEMENT wsrep_sync_wait = 0 FOR SELECT @@global.read_only, @@global.read_only = 0 AND (@@wsrep_on = 0 OR ( \
             (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
              WHERE VARIABLE_NAME = 'WSREP_READY') = 'ON' AND \
             (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
              WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT') = 'Synced'))",
        )
        .fetch_one(conn)
        .await?;
        let (read_only, writable): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        Ok(Role {
            writable: writable != 0,
            in_recovery: read_only != 0,
        })
    }

    /// The connection refused, reset or lost (2006, 2013), killed (1927, 4031), the
    /// server shutting down (1053), read-only (1290, 1836: a replica, or a primary
    /// demoted), a Galera node not ready (1047, out of the primary component).
    fn lost(error: &sqlx::Error) -> bool {
        match error {
            sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
            sqlx::Error::Database(db) => db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|e| {
                    matches!(
                        e.number(),
                        1047 | 1053 | 1290 | 1836 | 1927 | 2006 | 2013 | 4031
                    )
                }),
            _ => false,
        }
    }

    fn pool_options(_extra: &()) -> PoolOptions<MySql> {
        base_pool_options().after_connect(|conn, _| Box::pin(session_settings(conn)))
    }
}

/// What only the MariaDB store has.
impl MySqlStore {
    /// This store with its tables in `database` (created by
    /// [`migrate`](SqlStore::migrate)) on the same server, whatever the connections' own
    /// database: a host's own `books` or `authors` tables never collide with them. Names
    /// are 1 to 63 of `a-z`, `0-9` and `_`, not starting with a digit.
    pub fn in_database(mut self, database: &str) -> Result<Self, Error> {
        self.schema = Some(checked_name(database)?);
        Ok(self.rebuilt())
    }

    /// The database of the store's tables, if one was named.
    pub fn database(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// Counts the books again (the total, the ranges deep pages start from) and moves
    /// the version, for after a host went around the triggers that keep them: a
    /// `TRUNCATE` with `foreign_key_checks = 0`, triggers dropped for a bulk load. Until
    /// then, totals are wrong and cached answers may be served stale. Concurrent writes
    /// wait for it (it locks the counters and reads every book with a shared lock).
    pub async fn recount(&self) -> Result<(), StoreError> {
        const RECOUNT: [&str; 6] = [
            "SELECT id FROM {s}book_count FOR UPDATE",
            "DELETE FROM {s}book_ranges",
            "DELETE FROM {s}book_groups",
            "INSERT INTO {s}book_ranges (bucket, slot, n) \
             SELECT id >> 10, 0, COUNT(*) FROM {s}books GROUP BY id >> 10",
            "INSERT INTO {s}book_groups (grp, slot, n) \
             SELECT grp, 0, SUM(n) FROM (SELECT bucket >> 5 AS grp, n FROM {s}book_ranges) r \
             GROUP BY grp",
            "UPDATE {s}book_count SET n = IF(id = 1, (SELECT COALESCE(SUM(n), 0) FROM {s}book_ranges), 0), \
             version = version + 1 + FLOOR(RAND() * 1048576), \
             changes = changes + 1 + FLOOR(RAND() * 1048576)",
        ];
        let prefix = self.prefix();
        MySql::retried(self, || async {
            let mut tx = self.servers.pool.begin().await?;
            for statement in RECOUNT {
                let statement = Statement::new(statement, &prefix, Dialect::MySql);
                MySql::text_rows(&mut tx, statement.text.as_str().to_owned()).await?;
            }
            tx.commit().await
        })
        .await
        .or_store_error()
    }
}

/// `at` as MariaDB's `DATETIME(6)` text, written out (a strftime format is parsed again at
/// every call).
fn datetime_6(at: &chrono::DateTime<chrono::Utc>) -> String {
    use chrono::{Datelike, Timelike};
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.timestamp_subsec_micros() % 1_000_000
    )
}

/// The session settings of the store's own connections: a statement time bound
/// (`max_statement_time`, which MariaDB reports as error 1969) and as long at most for a
/// row lock (1205), both "unavailable" (503) rather than a request held for a minute.
///
/// On a Galera node, reads wait until the node applied every write the cluster committed
/// before them (`wsrep_sync_wait = 1`): a read on one node sees a write acknowledged on
/// another, as the exactness rule wants.
async fn session_settings(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    let seconds = STATEMENT_TIMEOUT.as_secs();
    conn.execute(AssertSqlSafe(format!(
        "SET SESSION max_statement_time = {seconds}, innodb_lock_wait_timeout = {seconds}, \
         wsrep_sync_wait = IF(@@wsrep_on, 1, 0)"
    )))
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_strftime_writes_them() {
        for micros in [0, 7, 999_999, 1_764_614_400_123_456] {
            let at = chrono::DateTime::from_timestamp_micros(micros).unwrap();
            assert_eq!(
                datetime_6(&at),
                at.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
            );
        }
    }
}
