//! The MariaDB store: a pool with lazy connections and a statement time bound, GTID
//! replicas behind it ([`replicas`]); its writes are in [`writes`].

mod replicas;
mod writes;

use std::str::FromStr;
use std::sync::Arc;

use books_core::store::{SharedCheck, StoreError};
use metrics::counter;
use sqlx::migrate::Migrator;
use sqlx::mysql::{
    MySql, MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions, MySqlRow,
};
use sqlx::{AssertSqlSafe, Executor};

use self::replicas::Gtid;
use crate::batch::Creates;
use crate::check::{Checked, VersionCheck};
use crate::error::{OrStoreError, is_deadlock};
use crate::queries::{Read, StatementRunner};
use crate::replicas::Replicas;
use crate::statement::{Arg, Dialect, Statement};
use crate::statements::{Statements, check_sql_mysql};
use crate::{ACQUIRE_TIMEOUT, Error, STATEMENT_TIMEOUT, migrate};

/// A MariaDB store (10.6 or later). Cloning is cheap (the pool is shared).
///
/// Connections are opened lazily by [`connect_lazy`](Self::connect_lazy): a store built
/// while the server is down answers "unavailable" (503) and recovers by itself once the
/// server is back. Every tier of the other SQL stores: exact cached reads across
/// processes (triggers keep the version, whoever writes), conditional writes under row
/// locks, idempotent creates, creates committed together, and reads from GTID replicas
/// ([`with_replicas`](Self::with_replicas)) never older than the primary. MariaDB has no
/// `LISTEN`/`NOTIFY`: there is no push mode, every cached read is checked. MySQL (no
/// `RETURNING`) is not supported: docs/stores.md says what differs.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// The database of the store's tables, if not the connections' own.
    database: Option<Arc<str>>,
    own: bool,
    sql: Arc<Statements>,
    check: Arc<VersionCheck<MySql>>,
    replicas: Option<Arc<Replicas<MySql>>>,
    /// The primary's GTID position for reads from replicas, read once for every read
    /// that asked before it was sent.
    positions: Arc<SharedCheck<Gtid>>,
    /// Creates waiting to be written together.
    creates: Arc<Creates>,
}

impl MySqlStore {
    /// The options for `url` (`mysql://user:password@host/db`, or `mariadb://…`):
    /// `utf8mb4`, and the session in UTC, as sqlx sets them by default. A pool the store
    /// builds gives each connection it opens a statement time bound of
    /// [`STATEMENT_TIMEOUT`] and waits that long at most for a row lock.
    pub fn options(url: &str) -> Result<MySqlConnectOptions, Error> {
        let url = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        Ok(MySqlConnectOptions::from_str(&url)?)
    }

    /// Connects to `url` with [`options`](Self::options), failing if the server is down.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(Self::options(url)?).await
    }

    /// Connects with explicit options, failing if the server is down.
    pub async fn connect_with(options: MySqlConnectOptions) -> Result<Self, Error> {
        let pool = pool_options().connect_with(options).await?;
        Ok(Self::from_own_pool(pool))
    }

    /// A store for `url` with [`options`](Self::options); connects on first use.
    pub fn connect_lazy(url: &str) -> Result<Self, Error> {
        Ok(Self::connect_lazy_with(Self::options(url)?))
    }

    /// A store with explicit options; connects on first use.
    pub fn connect_lazy_with(options: MySqlConnectOptions) -> Self {
        Self::from_own_pool(pool_options().connect_lazy_with(options))
    }

    /// A store over a pool the host already has. Its connections keep the host's
    /// settings: in UTC (`time_zone = '+00:00'`, sqlx's default) for the store's
    /// timestamps to be read back as written; no statement time bound unless the host
    /// sets one. Version checks go through it as well.
    pub fn from_pool(pool: MySqlPool) -> Self {
        Self::built(pool, false)
    }

    /// A store over the host's pools: `primary` for writes and for whatever must be
    /// current, `replicas` (GTID replicas of it) for reads that may go there, as
    /// [`with_replicas`](Self::with_replicas) says.
    pub fn from_pools(primary: MySqlPool, replicas: Vec<MySqlPool>) -> Self {
        Self::from_pool(primary).with_replicas(replicas)
    }

    /// A store over a pool it built: its version check gets a connection of its own.
    fn from_own_pool(pool: MySqlPool) -> Self {
        Self::built(pool, true)
    }

    fn built(pool: MySqlPool, own: bool) -> Self {
        Self {
            pool,
            database: None,
            own,
            sql: Arc::new(Statements::new(Dialect::MySql, "")),
            check: Arc::new(VersionCheck::new(
                Box::new(|_, _| String::new()),
                ["", ""],
                false,
                false,
            )),
            replicas: None,
            positions: Arc::default(),
            creates: Arc::default(),
        }
        .rebuilt()
    }

    /// The statements and the check for the store's database.
    fn rebuilt(self) -> Self {
        let prefix = self.sql_prefix();
        let check = check_sql_mysql(&prefix);
        Self {
            sql: Arc::new(Statements::new(Dialect::MySql, &prefix)),
            check: Arc::new(VersionCheck::new(
                Box::new(move |_, _| check.clone()),
                ["", ""],
                false,
                self.own,
            )),
            ..self
        }
    }

    /// This store with its tables in `database` (created by [`migrate`](Self::migrate))
    /// on the same server, whatever the connections' own database: a host's own `books`
    /// or `authors` tables never collide with them. Names are 1 to 63 of `a-z`, `0-9` and
    /// `_`, not starting with a digit.
    pub fn in_database(self, database: &str) -> Result<Self, Error> {
        let valid = (1..=63).contains(&database.len())
            && !database.starts_with(|c: char| c.is_ascii_digit())
            && database
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(Error::InvalidSchema(database.to_owned()));
        }
        Ok(Self {
            database: Some(database.into()),
            creates: Arc::default(),
            ..self
        }
        .rebuilt())
    }

    /// The database of the store's tables, if one was named.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// The database and a dot, or nothing: what goes before a table's name.
    fn sql_prefix(&self) -> String {
        self.database
            .as_deref()
            .map(|database| format!("{database}."))
            .unwrap_or_default()
    }

    /// The embedded migrations, recording into [`MIGRATIONS_TABLE`](crate::MIGRATIONS_TABLE):
    /// run them with your own tooling, or read each one's SQL.
    pub fn migrator() -> Migrator {
        migrate::migrator_of(migrate::MYSQL)
    }

    /// Applies the embedded migrations (call once at start; safe to repeat, to run from
    /// several processes at once, and beside a host's own sqlx migrations). MariaDB's
    /// DDL is not transactional: a migration cut in half is run again in full at the
    /// next start, every statement of it written to be repeated.
    pub async fn migrate(&self) -> Result<(), Error> {
        let mut options = (*self.pool.connect_options()).clone();
        if let Some(database) = &self.database {
            // A checked identifier: nothing to inject.
            sqlx::raw_sql(AssertSqlSafe(format!(
                "CREATE DATABASE IF NOT EXISTS {database}"
            )))
            .execute(&self.pool)
            .await?;
            options = options.database(database);
        }
        // One connection of its own, which holds the lock while migrating.
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        let migrated = migrate::mysql::run(&pool, Self::migrator()).await;
        pool.close().await;
        migrated
    }

    /// Inserts an author with this id, or renames it if it exists; later
    /// [`add_author`](books_core::store::AuthorStore::add_author) ids continue after the
    /// largest id.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        self.sql
            .upsert_author
            .query(&[Arg::Int(id), Arg::Name(name)])
            .execute(&self.pool)
            .await
            .or_store_error()?;
        Ok(())
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
             version = version + 1, changes = changes + 1",
        ];
        let prefix = self.sql_prefix();
        retry_deadlock(|| async {
            let mut tx = self.pool.begin().await?;
            for statement in RECOUNT {
                let statement = Statement::new(statement, &prefix, Dialect::MySql);
                sqlx::raw_sql(statement.text).execute(&mut *tx).await?;
            }
            tx.commit().await
        })
        .await
        .or_store_error()
    }

    /// The pool, for embedders that keep their own tables beside ours.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A read of data from the primary.
    async fn read_primary(
        &self,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<MySqlRow>, StoreError> {
        counter!("books_store_reads_total", "pool" => "primary").increment(1);
        let mut conn = self.pool.acquire().await.or_store_error()?;
        let rows = statement.query(args).fetch_all(&mut *conn).await;
        if rows.is_err() {
            // A deep page's procedure that failed may have left its read-only transaction
            // open: the connection goes, and its snapshot with it.
            conn.close_on_drop();
        }
        rows.or_store_error()
    }

    /// The version check's reading (see [`VersionCheck::tallied`]).
    async fn tallied(&self, above: Option<i64>) -> Result<Checked, StoreError> {
        self.check.tallied(&self.pool, above).await
    }

    /// Nothing pushes MariaDB's version: the cache asks.
    fn pushed_version(&self) -> Option<u64> {
        None
    }
}

/// For data reads, a replica that has caught up ([`replicas`]).
impl StatementRunner for MySqlStore {
    type Row = MySqlRow;

    fn sql(&self) -> &Statements {
        &self.sql
    }

    async fn read(
        &self,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<MySqlRow>, StoreError> {
        let Some(replicas) = self.replicas.as_ref().filter(|_| to == Read::Data) else {
            return self.read_primary(statement, args).await;
        };
        let position = self
            .positions
            .read(|| {
                let (check, pool) = (self.check.clone(), self.pool.clone());
                async move { replicas::primary_position(&check, &pool).await }
            })
            .await
            .map_err(crate::error::shared)?;
        if position.is_empty() {
            // No binary log on the primary: nothing tells how far a replica is.
            return self.read_primary(statement, args).await;
        }
        let text = statement.inline(args).or_store_error()?;
        match replicas.read(&position, &text).await {
            Ok(rows) => {
                counter!("books_store_reads_total", "pool" => "replica").increment(1);
                Ok(rows)
            }
            Err(_) => self.read_primary(statement, args).await,
        }
    }

    /// A deadlock rolled the write back whole: it is sent once more.
    async fn write(
        &self,
        statement: &Statement,
        then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<MySqlRow>, sqlx::Error> {
        retry_deadlock(|| async {
            let Some(then) = then else {
                return statement.query(args).fetch_all(&self.pool).await;
            };
            let mut tx = self.pool.begin().await?;
            statement.query(args).execute(&mut *tx).await?;
            let rows = then.query(args).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            Ok(rows)
        })
        .await
    }
}

/// `write`, and once more if a deadlock rolled it back (a transaction that deadlocked
/// is rolled back whole by InnoDB, so sending it again is safe).
pub(crate) async fn retry_deadlock<T, F, Fut>(write: F) -> Result<T, sqlx::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    match write().await {
        Err(error) if is_deadlock(&error) => {
            counter!("books_store_deadlock_retries_total").increment(1);
            write().await
        }
        outcome => outcome,
    }
}

/// The session settings of the store's own connections: a statement time bound
/// (`max_statement_time`, which MariaDB reports as error 1969) and as long at most for a
/// row lock (1205), both "unavailable" (503) rather than a request held for a minute.
pub(crate) async fn session_settings(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    let seconds = STATEMENT_TIMEOUT.as_secs();
    conn.execute(AssertSqlSafe(format!(
        "SET SESSION max_statement_time = {seconds}, innodb_lock_wait_timeout = {seconds}"
    )))
    .await?;
    Ok(())
}

/// No ping before each checkout (a round trip per request): a connection that died fails
/// its query once (503) and is dropped; the next checkout opens a fresh one.
fn pool_options() -> MySqlPoolOptions {
    MySqlPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .after_connect(|conn, _| Box::pin(session_settings(conn)))
}

crate::tiers::sql_store!(MySqlStore);
