//! The PostgreSQL store: a primary pool with lazy connections and a statement timeout,
//! optionally a schema of its own, a transaction-mode pooler in front ([`session`]),
//! streaming replicas behind ([`replicas`]), and push mode ([`push`]).

pub mod push;
mod replicas;
mod session;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use books_core::store::{StoreError, Version};
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection, Postgres};
use sqlx::{AssertSqlSafe, ConnectOptions, Row, Transaction};

use self::push::{Notify, Push};
use self::session::{Session, session_settings};
use crate::backend::Read;
use crate::backend::SqlStore;
use crate::backend::{Backend, Engine};
use crate::batch::NewBook;
use crate::check::VersionCheck;
use crate::error::OrStoreError;
use crate::lineage::Lineage;
use crate::servers::{Networked, Role, Servers, base_pool_options};
use crate::statement::{Arg, Dialect, Statement};
use crate::store::checked_name;
use crate::{ACQUIRE_TIMEOUT, Error, migrate, retry_conflicts};

/// A PostgreSQL store (feature `postgres`). Cloning is cheap (the pools are shared).
///
/// Built from a URL (`postgres://user@host/db`: [`connect_lazy`](SqlStore::connect_lazy),
/// [`connect`](SqlStore::connect)) or over a pool the host has
/// ([`from_pool`](SqlStore::from_pool)). Connections are opened lazily by
/// `connect_lazy`: a store built while the server is down answers "unavailable" (503) and
/// recovers by itself once the server is back. Its tables can live in a schema of their
/// own ([`in_schema`](SqlStore::in_schema)), so a host's own `books` or `authors` tables
/// never collide with them. It works behind a transaction-mode connection pooler
/// ([`transaction_pooler`](SqlStore::transaction_pooler)), reads from streaming replicas
/// ([`with_replicas`](SqlStore::with_replicas)) without ever answering older than the
/// primary, and in [push mode](crate::push) learns the version without asking. Each
/// connection it opens gets a statement timeout of
/// [`STATEMENT_TIMEOUT`](crate::STATEMENT_TIMEOUT) (once per connection, or per
/// transaction behind a pooler); times are read and written as UTC.
pub type PostgresStore = SqlStore<Postgres>;

/// What the PostgreSQL store keeps beside its servers.
#[derive(Debug, Clone, Default)]
pub struct PgExtra {
    session: Session,
    /// Read by the store's own pool when it opens a connection: direct connections get
    /// the session settings, a pooler's none.
    pooled: Arc<AtomicBool>,
    /// A direct connection's options for the push listener, when the pool's are a pooler's.
    notify: Option<Notify>,
    /// The push listener, when [`listening`](SqlStore::listening).
    push: Option<Arc<Push>>,
    /// The history the check and the listener tell, kept when the store is rebuilt.
    lineage: Arc<Lineage>,
}

impl Backend for Postgres {}

impl Engine for Postgres {
    type Servers = Servers<Postgres>;
    type Extra = PgExtra;
    const DIALECT: Dialect = Dialect::Postgres;
    const MIGRATIONS: &'static [(&'static str, &'static str)] = migrate::POSTGRES;

    fn persistent(extra: &PgExtra) -> bool {
        extra.session.persistent()
    }

    /// Direct or through a pooler ([`session`]), and for data reads, a replica that has
    /// caught up ([`crate::servers`]).
    async fn read(
        store: &PostgresStore,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<sqlx::postgres::PgRow>, StoreError> {
        let (session, pool) = (store.extra.session, &store.servers.pool);
        Servers::read(store, to, statement, args, || async {
            session
                .run(pool, statement, args, true)
                .await
                .or_store_error()
        })
        .await
    }

    async fn write(
        store: &PostgresStore,
        statement: &Statement,
        _then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
        let (session, servers) = (store.extra.session, &store.servers);
        let written = retry_conflicts(|| session.run(&servers.pool, statement, args, false));
        servers.primary(written).await
    }

    async fn ready(store: &PostgresStore) -> Result<(), StoreError> {
        Servers::ready(store).await
    }

    async fn begin(store: &PostgresStore) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        store.extra.session.begin(&store.servers.pool).await
    }

    async fn retried<T, F, Fut>(store: &PostgresStore, work: F) -> Result<T, sqlx::Error>
    where
        T: Send,
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, sqlx::Error>> + Send,
    {
        let work = retry_conflicts(|| store.extra.session.bounded(work()));
        store.servers.primary(work).await
    }

    /// One statement from arrays of the books' fields (`unnest`): the insert trigger runs
    /// once for all of them.
    async fn insert_many(
        store: &PostgresStore,
        conn: &mut PgConnection,
        books: &[NewBook],
    ) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
        let (mut titles, mut authors, mut years, mut times) = (vec![], vec![], vec![], vec![]);
        for new in books {
            titles.push(new.book.title.as_str());
            authors.push(new.book.author_id);
            years.push(new.book.year);
            times.push(new.now);
        }
        let rows = sqlx::query(store.sql.books.create_many.text.clone())
            .persistent(store.persistent())
            .bind(titles)
            .bind(authors)
            .bind(years)
            .bind(times)
            .fetch_all(conn)
            .await?;
        Ok(rows)
    }

    /// Directly; behind a pooler the transaction carries the session settings.
    fn inserts_alone(extra: &PgExtra) -> bool {
        !extra.session.pooler
    }

    /// The same statement on a connection of the pool, committed by itself.
    async fn insert_alone(
        store: &PostgresStore,
        books: &[NewBook],
    ) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
        let mut conn = store.servers.pool.acquire().await?;
        Self::insert_many(store, &mut conn, books).await
    }

    /// Directly, on a connection of its own (so a host's pool keeps its `search_path`),
    /// each migration in a transaction or online ([`migrate::postgres::run`]); behind a
    /// [pooler](SqlStore::transaction_pooler), in one transaction through it,
    /// serialised by a transaction-level advisory lock (a session-level one would be
    /// taken on one server connection and released on another).
    async fn migrate(store: &PostgresStore) -> Result<(), Error> {
        // On the primary, whichever host of the URL it is now.
        store.wait_for_primary(std::time::Duration::ZERO).await?;
        let migrator = PostgresStore::migrator();
        let pool = &store.servers.pool;
        if store.extra.session.pooler {
            return migrate::postgres::in_one_transaction(pool, &migrator, store.schema()).await;
        }
        let mut options = (*pool.connect_options()).clone();
        if let Some(schema) = &store.schema {
            options = options.options([("search_path", &**schema)]);
        }
        let connected = tokio::time::timeout(ACQUIRE_TIMEOUT, options.connect()).await;
        let mut conn = connected.map_err(|_| sqlx::Error::PoolTimedOut)??;
        let migrated = migrate::postgres::run(&mut conn, &migrator, store.schema()).await;
        let _ = sqlx::Connection::close(conn).await;
        migrated
    }

    /// Prepared, or behind a pooler written in and sent as text after the transaction's
    /// session settings.
    fn version_check(
        servers: &Servers<Postgres>,
        extra: &PgExtra,
        prefix: &str,
        _schema: Option<&str>,
    ) -> VersionCheck<Postgres> {
        let simple = extra.session.pooler.then(session::local_settings);
        let own = servers.own.then(|| servers.generation());
        VersionCheck::new(Dialect::Postgres, prefix, "", simple, own)
            .with_lineage(extra.lineage.clone())
    }

    fn pushed_version(extra: &PgExtra) -> Option<Version> {
        extra.push.as_ref().and_then(|push| push.known())
    }
}

impl Networked for Postgres {
    const POOL_NAME: &'static str = "postgres";
    const SYSTEM: &'static str = "postgresql";
    const NO_WAIT: &'static str = "";

    fn parse(url: &str) -> Result<PgConnectOptions, Error> {
        Ok(PgConnectOptions::from_str(url)?)
    }

    fn address(options: &PgConnectOptions) -> String {
        match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        }
    }

    async fn role(conn: &mut PgConnection) -> Result<Role, sqlx::Error> {
        // One simple-protocol message, no statement prepared: behind a transaction pooler,
        // a named statement may exist already on the server session it lands on (another
        // client's), and an unnamed one may be gone by the time it is bound.
        let row = sqlx::raw_sql(AssertSqlSafe(
            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'",
        ))
        .fetch_one(conn)
        .await?;
        let (in_recovery, read_only): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
        Ok(Role {
            writable: !read_only,
            in_recovery,
        })
    }

    /// The connection refused, reset or closed, a connection exception (class 08), a
    /// read-only transaction (25006: the server is a standby now), the server shutting
    /// down or starting (57P01, 57P02, 57P03).
    fn lost(error: &sqlx::Error) -> bool {
        match error {
            sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08") || matches!(&*code, "25006" | "57P01" | "57P02" | "57P03")
            }),
            _ => false,
        }
    }

    /// A direct connection gets the session settings once, when it is opened; a
    /// pooler's none ([`SqlStore::transaction_pooler`]).
    fn pool_options(extra: &PgExtra) -> PoolOptions<Postgres> {
        let pooled = extra.pooled.clone();
        base_pool_options().after_connect(move |conn, _| {
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
}

/// What only the PostgreSQL store has.
impl PostgresStore {
    /// This store with its tables in `schema` (created by [`migrate`](SqlStore::migrate)),
    /// whatever the connections' `search_path`. Names are 1 to 63 of `a-z`, `0-9` and
    /// `_`, not starting with a digit.
    pub fn in_schema(mut self, schema: &str) -> Result<Self, Error> {
        self.schema = Some(checked_name(schema)?);
        // A listener follows the tables it was started for.
        let listening = self.extra.push.take().is_some();
        let store = self.rebuilt();
        Ok(if listening { store.listening() } else { store })
    }

    /// The schema of the store's tables, if one was named.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// This store for a transaction-mode connection pooler (PgBouncer with
    /// `pool_mode = transaction`, or a managed pooler) in front of PostgreSQL, when `on`.
    /// No statement is named or kept beyond its transaction, the statement time bound is
    /// set per transaction (`SET LOCAL`) instead of per connection, each read is one
    /// simple-protocol message and each write a transaction of its own, and
    /// [`migrate`](SqlStore::migrate) takes a transaction-level lock. Push mode needs a
    /// direct connection besides ([`notify_with`](SqlStore::notify_with)).
    ///
    /// Set it before the store's first connection (a store from `connect_lazy…` or a
    /// host's pool): `connect` and `connect_with` open one at once, with the
    /// direct-connection settings.
    pub fn transaction_pooler(mut self, on: bool) -> Self {
        self.extra.pooled.store(on, Ordering::Relaxed);
        self.extra.session = Session { pooler: on };
        self.rebuilt()
    }
}
