//! The PostgreSQL store: a primary pool with lazy connections and a statement timeout,
//! optionally a schema of its own, a transaction-mode pooler in front ([`session`]) and
//! streaming replicas behind ([`replicas`]); its writes are in [`writes`].

pub mod push;
mod replicas;
mod session;
mod writes;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use books_core::store::{SharedCheck, StoreError};
use metrics::counter;
use sqlx::AssertSqlSafe;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow, Postgres};

use self::push::{Notify, Push};
use self::session::{Session, session_settings};
use crate::batch::Creates;
use crate::check::{CheckSql, Checked, VersionCheck};
use crate::error::OrStoreError;
use crate::queries::{Read, StatementRunner};
use crate::replicas::Replicas;
use crate::statement::{Arg, Dialect, Statement};
use crate::statements::{Statements, check_sql};
use crate::{ACQUIRE_TIMEOUT, Error, migrate};

/// A PostgreSQL store. Cloning is cheap (the pools are shared).
///
/// Connections are opened lazily: a store built while the server is down answers
/// "unavailable" (503) and recovers by itself once the server is back. Its tables can
/// live in a schema of their own ([`in_schema`](Self::in_schema)), so a host's own
/// `books` or `authors` tables never collide with them. It works behind a
/// transaction-mode connection pooler ([`transaction_pooler`](Self::transaction_pooler))
/// and reads from streaming replicas ([`with_replicas`](Self::with_replicas)) without
/// ever answering older than the primary.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    schema: Option<Arc<str>>,
    sql: Arc<Statements>,
    session: Session,
    /// Read by the store's own pool when it opens a connection: direct connections get
    /// the session settings, a pooler's none.
    pooled: Arc<AtomicBool>,
    /// Whether this store built its pool (its check then has a connection of its own).
    own: bool,
    check: Arc<VersionCheck<Postgres>>,
    replicas: Option<Arc<Replicas<Postgres>>>,
    /// The primary's WAL position for reads from replicas, read once for every read that
    /// asked before it was sent.
    positions: Arc<SharedCheck<i64>>,
    /// A direct connection's options for the push listener, when the pool's are a pooler's.
    notify: Option<Notify>,
    /// The push listener, when [`listening`](Self::listening).
    push: Option<Arc<Push>>,
    /// Creates waiting to be written together (one queue per set of tables).
    creates: Arc<Creates>,
}

impl PostgresStore {
    /// The options for `url` (`postgres://user@host/db`). A pool the store builds from
    /// them gives each connection it opens a statement timeout of [`STATEMENT_TIMEOUT`](crate::STATEMENT_TIMEOUT)
    /// (once per connection, or per transaction behind a
    /// [pooler](Self::transaction_pooler)); times are read and written as UTC.
    pub fn options(url: &str) -> Result<PgConnectOptions, Error> {
        Ok(PgConnectOptions::from_str(url)?)
    }

    /// Connects to `url` with [`options`](Self::options), failing if the server is down.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(Self::options(url)?).await
    }

    /// Connects with explicit options, failing if the server is down.
    pub async fn connect_with(options: PgConnectOptions) -> Result<Self, Error> {
        let pooled = Arc::default();
        let pool = pool_options(&pooled).connect_with(options).await?;
        Ok(Self::from_own_pool(pool, pooled))
    }

    /// A store for `url` with [`options`](Self::options); connects on first use.
    pub fn connect_lazy(url: &str) -> Result<Self, Error> {
        Ok(Self::connect_lazy_with(Self::options(url)?))
    }

    /// A store with explicit options; connects on first use.
    pub fn connect_lazy_with(options: PgConnectOptions) -> Self {
        let pooled = Arc::default();
        let pool = pool_options(&pooled).connect_lazy_with(options);
        Self::from_own_pool(pool, pooled)
    }

    /// A store over a pool the host already has. Its connections keep the host's
    /// settings (no statement timeout unless the host sets one, or a
    /// [pooler](Self::transaction_pooler)); version checks go through it as well.
    pub fn from_pool(pool: PgPool) -> Self {
        Self {
            pool,
            schema: None,
            sql: Arc::new(Statements::new(Dialect::Postgres, "")),
            session: Session::default(),
            pooled: Arc::default(),
            own: false,
            check: Arc::new(VersionCheck::new(
                Box::new(|_, _| String::new()),
                ["", ""],
                false,
                false,
            )),
            replicas: None,
            positions: Arc::default(),
            notify: None,
            push: None,
            creates: Arc::default(),
        }
        .rebuilt()
    }

    /// A store over the host's pools: `primary` for writes and for whatever must be
    /// current, `replicas` (streaming replicas of it) for reads that may go there, as
    /// [`with_replicas`](Self::with_replicas) says.
    pub fn from_pools(primary: PgPool, replicas: Vec<PgPool>) -> Self {
        Self::from_pool(primary).with_replicas(replicas)
    }

    /// A store over a pool it built: its version check gets a connection of its own.
    fn from_own_pool(pool: PgPool, pooled: Arc<AtomicBool>) -> Self {
        Self {
            own: true,
            pooled,
            ..Self::from_pool(pool)
        }
        .rebuilt()
    }

    /// The statements and the check for the store's schema and mode.
    fn rebuilt(self) -> Self {
        let schema = self.sql_schema();
        let pooler = self.session.pooler;
        let check: CheckSql = Box::new(move |above, last| {
            let check = check_sql(&schema, above, last);
            if pooler {
                format!("{}; {check}", session::local_settings())
            } else {
                check
            }
        });
        Self {
            sql: Arc::new(Statements::new(Dialect::Postgres, &self.sql_schema())),
            check: Arc::new(VersionCheck::new(check, ["$1", "$2"], pooler, self.own)),
            ..self
        }
    }

    /// This store with its tables in `schema` (created by [`migrate`](Self::migrate)),
    /// whatever the connections' `search_path`. Names are 1 to 63 of `a-z`, `0-9` and
    /// `_`, not starting with a digit.
    pub fn in_schema(self, schema: &str) -> Result<Self, Error> {
        let valid = (1..=63).contains(&schema.len())
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(Error::InvalidSchema(schema.to_owned()));
        }
        let listening = self.push.is_some();
        let store = Self {
            schema: Some(schema.into()),
            push: None,
            creates: Arc::default(),
            ..self
        }
        .rebuilt();
        // A listener follows the tables it was started for.
        Ok(if listening { store.listening() } else { store })
    }

    /// This store for a transaction-mode connection pooler (PgBouncer with
    /// `pool_mode = transaction`, or a managed pooler) in front of PostgreSQL, when `on`.
    /// No statement is named or kept beyond its transaction, the statement time bound is
    /// set per transaction (`SET LOCAL`) instead of per connection, each read is one
    /// simple-protocol message and each write a transaction of its own, and
    /// [`migrate`](Self::migrate) takes a transaction-level lock. Push mode needs a
    /// direct connection besides ([`notify_with`](Self::notify_with)).
    ///
    /// Set it before the store's first connection (a store from `connect_lazy…` or a
    /// host's pool): `connect` and `connect_with` open one at once, with the
    /// direct-connection settings.
    pub fn transaction_pooler(self, on: bool) -> Self {
        self.pooled.store(on, Ordering::Relaxed);
        Self {
            session: Session { pooler: on },
            ..self
        }
        .rebuilt()
    }

    /// The schema and a dot, or nothing: what goes before a table's name.
    fn sql_schema(&self) -> String {
        self.schema
            .as_deref()
            .map(|schema| format!("{schema}."))
            .unwrap_or_default()
    }

    /// The schema of the store's tables, if one was named.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The embedded migrations, recording into [`MIGRATIONS_TABLE`](crate::MIGRATIONS_TABLE)
    /// of the first schema on the `search_path`: run them with your own tooling (after
    /// `SET search_path TO <schema>` for a schema of their own), or read each one's SQL.
    pub fn migrator() -> Migrator {
        migrate::migrator_of(migrate::POSTGRES)
    }

    /// Applies the embedded migrations (call once at start; safe to repeat, to run from
    /// several processes at once, and beside a host's own sqlx migrations). Directly,
    /// they run on a connection of their own, so a host's pool keeps its `search_path`;
    /// behind a [pooler](Self::transaction_pooler), in one transaction through it,
    /// serialised by a transaction-level advisory lock (a session-level one would be
    /// taken on one server connection and released on another).
    pub async fn migrate(&self) -> Result<(), Error> {
        let migrator = Self::migrator();
        if self.session.pooler {
            return migrate::postgres::in_one_transaction(&self.pool, &migrator, self.schema())
                .await;
        }
        let mut options = (*self.pool.connect_options()).clone();
        let mut migrator = migrator;
        if let Some(schema) = &self.schema {
            migrator.create_schema(schema.to_string());
            options = options.options([("search_path", &**schema)]);
        }
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        migrator.run(&pool).await?;
        pool.close().await;
        Ok(())
    }

    /// Inserts an author with this id, or renames it if it exists; later
    /// [`add_author`](books_core::store::AuthorStore::add_author) ids continue after the largest id.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        let persistent = self.session.persistent();
        let mut tx = self.session.begin(&self.pool).await.or_store_error()?;
        self.sql
            .upsert_author
            .query(&[Arg::Int(id), Arg::Name(name)])
            .persistent(persistent)
            .execute(&mut *tx)
            .await
            .or_store_error()?;
        // A checked identifier (`in_schema`), or none: nothing to inject.
        let authors = format!("{}authors", self.sql_schema());
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SELECT setval(pg_get_serial_sequence('{authors}', 'id'), \
             GREATEST((SELECT MAX(id) FROM {authors}), 1))"
        )))
        .execute(&mut *tx)
        .await
        .or_store_error()?;
        tx.commit().await.or_store_error()
    }

    /// The pool, for embedders that keep their own tables beside ours.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A read of data from the primary.
    async fn read_primary(
        &self,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<PgRow>, StoreError> {
        counter!("books_store_reads_total", "pool" => "primary").increment(1);
        self.session
            .read(&self.pool, statement, args)
            .await
            .or_store_error()
    }
}

/// Direct or through a pooler ([`session`]), and for data reads, a replica that has
/// caught up ([`replicas`]).
impl StatementRunner for PostgresStore {
    type Row = PgRow;

    fn sql(&self) -> &Statements {
        &self.sql
    }

    async fn read(
        &self,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<PgRow>, StoreError> {
        match (&self.replicas, to) {
            (Some(replicas), Read::Data) => {
                let position = self
                    .positions
                    .read(|| {
                        let (check, pool) = (self.check.clone(), self.pool.clone());
                        async move { replicas::primary_position(&check, &pool).await }
                    })
                    .await
                    .map_err(crate::error::shared)?;
                let text = statement.inline(args).or_store_error()?;
                match replicas.read(&position, &text).await {
                    Ok(rows) => {
                        counter!("books_store_reads_total", "pool" => "replica").increment(1);
                        Ok(rows)
                    }
                    Err(_) => self.read_primary(statement, args).await,
                }
            }
            (None, Read::Data) => self.read_primary(statement, args).await,
            (_, Read::Primary) => self
                .session
                .read(&self.pool, statement, args)
                .await
                .or_store_error(),
        }
    }

    async fn write(
        &self,
        statement: &Statement,
        _then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        self.session.write(&self.pool, statement, args).await
    }
}

/// No ping before each checkout (a round trip per request): a connection that died fails
/// its query once (503) and is dropped; the next checkout opens a fresh one. A direct
/// connection gets the session settings once, when it is opened; a pooler's none
/// (`pooled`: [`PostgresStore::transaction_pooler`]).
fn pool_options(pooled: &Arc<AtomicBool>) -> PgPoolOptions {
    let pooled = pooled.clone();
    PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .after_connect(move |conn, _| {
            let direct = !pooled.load(Ordering::Relaxed);
            Box::pin(async move {
                if direct {
                    sqlx::raw_sql(AssertSqlSafe(session_settings()))
                        .execute(conn)
                        .await?;
                }
                Ok(())
            })
        })
}

impl PostgresStore {
    /// The version check's reading (see [`VersionCheck::tallied`]).
    async fn tallied(&self, above: Option<i64>) -> Result<Checked, StoreError> {
        self.check.tallied(&self.pool, above).await
    }
}

crate::tiers::sql_store!(PostgresStore);
