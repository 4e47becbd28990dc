//! The PostgreSQL store: a primary pool with lazy connections and a statement timeout,
//! optionally a schema of its own, a transaction-mode pooler in front ([`session`]) and
//! streaming replicas behind ([`replicas`]).

mod replicas;
mod session;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use books_core::{
    BookInput, BookRecord, Guarded, KeyedCreate, Precondition, StoreError, VersionReading,
};
use chrono::{DateTime, Utc};
use metrics::counter;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow, Postgres};
use sqlx::{AssertSqlSafe, SqlStr};

pub use replicas::{DEFAULT_WAIT as DEFAULT_REPLICA_WAIT, DOWN_FOR, PROBE_INTERVAL, ReplicaState};

use self::replicas::Replicas;
use self::session::{Session, inline, session_settings};
use crate::batch::{self, Created, Creates, NewBook, Write};
use crate::check::{Check, CheckSql};
use crate::error::OrStoreError;
use crate::push::{self, Push};
use crate::queries::{self, Arg, Read, Run, bind, book_args, insert_in, key_args};
use crate::rows::{LIST_POSTGRES, NO_POSITION, Statements, StoreRow, check_sql};
use crate::{ACQUIRE_TIMEOUT, Error, migrate};

/// The longest a single statement may run before PostgreSQL cancels it (503).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The primary's WAL position, for replicas to reach.
const POSITION: &str = "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";

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
    check: Arc<Check<Postgres>>,
    replicas: Option<Arc<Replicas>>,
    /// A direct connection's options for the push listener, when the pool's are a pooler's.
    notify: Option<Notify>,
    /// The push listener, when [`listening`](Self::listening).
    push: Option<Arc<Push>>,
    /// Creates waiting to be written together (one queue per set of tables).
    creates: Arc<Creates>,
}

/// Connection options, without printing the password.
#[derive(Clone)]
struct Notify(PgConnectOptions);

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Notify({}:{})", self.0.get_host(), self.0.get_port())
    }
}

impl PostgresStore {
    /// The options for `url` (`postgres://user@host/db`). A pool the store builds from
    /// them gives each connection it opens a statement timeout of [`STATEMENT_TIMEOUT`]
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
            sql: Arc::new(Statements::new(LIST_POSTGRES, "")),
            session: Session::default(),
            pooled: Arc::default(),
            own: false,
            check: Arc::new(Check::new(
                Box::new(|_, _| String::new()),
                ["", ""],
                false,
                false,
            )),
            replicas: None,
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

    /// The statements and the check for the store's schema, mode and replicas.
    fn rebuilt(self) -> Self {
        let schema = self.sql_schema();
        let position = if self.replicas.is_some() {
            POSITION
        } else {
            NO_POSITION
        };
        let pooler = self.session.pooler;
        let check: CheckSql = Box::new(move |above, last| {
            let check = check_sql(&schema, position, above, last);
            if pooler {
                format!("{}; {check}", session::local_settings())
            } else {
                check
            }
        });
        Self {
            sql: Arc::new(Statements::new(LIST_POSTGRES, &self.sql_schema())),
            check: Arc::new(Check::new(check, ["$1", "$2"], pooler, self.own)),
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

    /// This store reading from `replicas`, streaming replicas of the primary: pages and
    /// books are read there once a replica has replayed the primary's WAL position as
    /// the read began (so no read is older than a write acknowledged before it, by any
    /// process), else after a short wait ([`replica_wait`](Self::replica_wait)) from the
    /// primary. Writes, version checks, migrations and `LISTEN` stay on the primary. A
    /// replica that is down or lagging costs latency, never an error; it is asked again
    /// after [`DOWN_FOR`]. See [`replica_pool`](Self::replica_pool) for pools of the
    /// store's own making.
    pub fn with_replicas(self, replicas: Vec<PgPool>) -> Self {
        let replicas =
            (!replicas.is_empty()).then(|| Arc::new(Replicas::new(replicas, DEFAULT_REPLICA_WAIT)));
        Self { replicas, ..self }.rebuilt()
    }

    /// How long a read waits for a replica to catch up before the primary answers it
    /// (default [`DEFAULT_REPLICA_WAIT`]).
    pub fn replica_wait(self, wait: Duration) -> Self {
        let replicas = self
            .replicas
            .as_ref()
            .map(|replicas| Arc::new(replicas.with_wait(wait)));
        Self { replicas, ..self }
    }

    /// A lazily connected pool for a replica at `url`, as the store would build one: no
    /// ping before use and a one-second wait for a connection (a replica that cannot be
    /// reached is left out quickly).
    pub fn replica_pool(url: &str) -> Result<PgPool, Error> {
        Ok(PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(1))
            .test_before_acquire(false)
            .connect_lazy_with(Self::options(url)?))
    }

    /// This store's push listener connects with `options` (a direct connection to the
    /// primary) instead of the pool's: behind a transaction pooler, `LISTEN` needs one.
    pub fn notify_with(self, options: PgConnectOptions) -> Self {
        Self {
            notify: Some(Notify(options)),
            ..self
        }
    }

    /// This store with a push listener (a tokio task on one connection of its own, opened
    /// with the pool's options or [`notify_with`](Self::notify_with)'s; call inside a
    /// tokio runtime). While push mode is on for the database
    /// ([`set_push`](Self::set_push)) and the listener is connected, the API's cache takes
    /// the version the listener last read ([`BookStore::known_version`](books_core::BookStore::known_version)) instead of
    /// asking per request: cached reads cost no query, but may be as old as the
    /// staleness bound in [`push`](crate::push) (typically one notification and one round
    /// trip; at most [`HEARTBEAT`](push::HEARTBEAT) plus
    /// [`PROBE_TIMEOUT`](push::PROBE_TIMEOUT) when a connection dies silently). Otherwise
    /// the cache asks, exactly as without a listener. The listener stops when the last
    /// clone of the store is dropped or the pool is closed. Behind a
    /// [pooler](Self::transaction_pooler) without [`notify_with`](Self::notify_with)
    /// there is no connection to listen on: the store logs why and stays exact.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it spawns the listener's task).
    pub fn listening(self) -> Self {
        let options = match (&self.notify, self.session.pooler) {
            (Some(Notify(direct)), _) => direct.clone(),
            (None, false) => (*self.pool.connect_options()).clone(),
            (None, true) => {
                tracing::error!(
                    "push mode needs a direct connection for LISTEN, which a transaction \
                     pooler cannot give (notify_with): this store asks the database instead"
                );
                return self;
            }
        };
        let state = push::state_sql(&self.sql_schema());
        Self {
            push: Some(Arc::new(Push::start(&self.pool, options, state))),
            ..self
        }
    }

    /// Turns push mode on or off for the database — every process and every writer,
    /// the host's own SQL included — by attaching or dropping the `books_notify`
    /// triggers (needs the right to alter the tables), and tells listeners at once.
    /// Every write then notifies: PostgreSQL commits notifying transactions one at a
    /// time, so writes slow down (BENCHMARKS.md measures by how much); it suits
    /// read-mostly deployments. Safe to repeat.
    pub async fn set_push(&self, on: bool) -> Result<(), Error> {
        let s = self.sql_schema();
        let mut tx = self.session.begin(&self.pool).await?;
        for table in ["books", "authors"] {
            // Safe: `s` is empty or a checked identifier and a dot.
            let ddl = if on {
                format!(
                    "CREATE OR REPLACE TRIGGER books_notify \
                     AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {s}{table} \
                     FOR EACH STATEMENT EXECUTE FUNCTION {s}books_notify()"
                )
            } else {
                format!("DROP TRIGGER IF EXISTS books_notify ON {s}{table}")
            };
            sqlx::raw_sql(AssertSqlSafe(ddl)).execute(&mut *tx).await?;
        }
        sqlx::query("SELECT pg_notify($1, 'push')")
            .persistent(self.session.persistent())
            .bind(push::CHANNEL)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
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
        migrate::ours(migrate::POSTGRES)
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
        let mut conn = pool.acquire().await?;
        migrate::postgres::adopt_legacy(&mut conn, &migrator).await?;
        drop(conn);
        migrator.run(&pool).await?;
        pool.close().await;
        Ok(())
    }

    /// Inserts an author with this id, or renames it if it exists; later
    /// [`add_author`](books_core::AuthorStore::add_author) ids continue after the largest id.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        let persistent = self.session.persistent();
        let mut tx = self.session.begin(&self.pool).await.or_store_error()?;
        sqlx::query(self.sql.upsert_author.clone())
            .persistent(persistent)
            .bind(id)
            .bind(name)
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

    /// The replicas' pools, if any.
    pub fn replica_pools(&self) -> Vec<PgPool> {
        self.replicas
            .as_ref()
            .map(|replicas| replicas.pools())
            .unwrap_or_default()
    }

    /// What the store knows of each replica: whether it is up, how far behind, how many
    /// reads it answered (the same as the `books_store_replica_*` metrics).
    pub fn replicas(&self) -> Vec<ReplicaState> {
        self.replicas
            .as_ref()
            .map(|replicas| replicas.states())
            .unwrap_or_default()
    }

    /// A read of data from the primary.
    async fn read_primary(&self, sql: &SqlStr, args: &[Arg<'_>]) -> Result<Vec<PgRow>, StoreError> {
        counter!("books_store_reads_total", "pool" => "primary").increment(1);
        self.session
            .read(&self.pool, sql, args)
            .await
            .or_store_error()
    }
}

/// Direct or through a pooler ([`session`]), and for data reads, a replica that has
/// caught up ([`replicas`]).
impl Run for PostgresStore {
    type Row = PgRow;

    fn sql(&self) -> &Statements {
        &self.sql
    }

    async fn read(
        &self,
        to: Read,
        sql: &SqlStr,
        args: &[Arg<'_>],
    ) -> Result<Vec<PgRow>, StoreError> {
        match (&self.replicas, to) {
            (Some(replicas), Read::Data) => {
                let position = self.check.run(&self.pool, None).await?.position;
                let position = position.ok_or_else(|| StoreError::other("no WAL position"))?;
                let statement = inline(sql.as_str(), args).or_store_error()?;
                match replicas.read(position, &statement).await {
                    Ok(rows) => {
                        counter!("books_store_reads_total", "pool" => "replica").increment(1);
                        Ok(rows)
                    }
                    Err(_) => self.read_primary(sql, args).await,
                }
            }
            (None, Read::Data) => self.read_primary(sql, args).await,
            (_, Read::Primary) => self
                .session
                .read(&self.pool, sql, args)
                .await
                .or_store_error(),
        }
    }

    async fn write(&self, sql: &SqlStr, args: &[Arg<'_>]) -> Result<Vec<PgRow>, sqlx::Error> {
        self.session.write(&self.pool, sql, args).await
    }
}

impl Write for PostgresStore {
    async fn create_one(&self, new: &NewBook) -> Created {
        if new.key.is_none() {
            return queries::create(self, new).await;
        }
        let persistent = self.session.persistent();
        let created = self.session.bounded(async {
            let mut tx = self.session.begin(&self.pool).await?;
            let created = insert_in::<Postgres>(&mut tx, &self.sql, persistent, new).await?;
            match created {
                Ok(KeyedCreate::Created(_)) => tx.commit().await?,
                _ => tx.rollback().await?,
            }
            Ok(created)
        });
        created.await.or_store_error()?
    }

    /// One statement in a transaction, committed once every row is attributed to its
    /// book ([`batch::attribute`]) and every key's record is kept (a key found taken
    /// sends the batch back, to be written one create at a time).
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        let (mut titles, mut authors, mut years, mut times) = (vec![], vec![], vec![], vec![]);
        for new in books {
            titles.push(new.book.title.as_str());
            authors.push(new.book.author_id);
            years.push(new.book.year);
            times.push(new.now);
        }
        let persistent = self.session.persistent();
        self.session
            .bounded(async {
                let mut tx = self.session.begin(&self.pool).await?;
                let rows = sqlx::query(self.sql.create_many.clone())
                    .persistent(persistent)
                    .bind(titles)
                    .bind(authors)
                    .bind(years)
                    .bind(times)
                    .fetch_all(&mut *tx)
                    .await?;
                let written = rows
                    .iter()
                    .map(|row| row.book().map(Into::into))
                    .collect::<Result<_, _>>()?;
                let Some(created) = batch::attribute(books, written) else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                for (new, created) in books.iter().zip(&created) {
                    let (Some(key), Ok(KeyedCreate::Created(book))) = (&new.key, created) else {
                        continue;
                    };
                    let answer = (key.answer)(book);
                    let kept = bind(
                        sqlx::query(self.sql.keep_key.clone()),
                        &key_args(key, &answer, new.now),
                    )
                    .persistent(persistent)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if kept.is_none() {
                        tx.rollback().await?;
                        return Ok(None);
                    }
                }
                tx.commit().await?;
                Ok(Some(created))
            })
            .await
    }
}

impl PostgresStore {
    /// The book `id` with its row locked for a conditional write, and its author's row
    /// locked against renames (the name shows in the book's answers), in `tx`.
    async fn locked(
        &self,
        tx: &mut PgConnection,
        id: i64,
    ) -> Result<Option<BookRecord>, sqlx::Error> {
        let persistent = self.session.persistent();
        let row = sqlx::query(self.sql.lock_book.clone())
            .persistent(persistent)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut book: BookRecord = row.book()?.into();
        if let Some(author) = book.author_id {
            let name: Option<Option<String>> = sqlx::query_scalar(self.sql.lock_author.clone())
                .persistent(persistent)
                .bind(author)
                .fetch_optional(&mut *tx)
                .await?;
            book.author_name = name.flatten();
        }
        Ok(Some(book))
    }

    /// `write` (`$1`: the book's id) on the book `id` if `precondition` holds for it, in
    /// one transaction that holds its row (and its author's) from the check to the
    /// commit: the written book's rows, or why not.
    async fn guarded(
        &self,
        id: i64,
        precondition: Precondition<'_>,
        write: &SqlStr,
        args: &[Arg<'_>],
    ) -> Result<Guarded<Option<Vec<PgRow>>>, sqlx::Error> {
        let persistent = self.session.persistent();
        self.session
            .bounded(async {
                let mut tx = self.session.begin(&self.pool).await?;
                match self.locked(&mut tx, id).await? {
                    None => return Ok(Guarded::Done(None)),
                    Some(current) if !precondition(&current) => {
                        return Ok(Guarded::Refused(current));
                    }
                    Some(_) => {}
                }
                let rows = bind(sqlx::query(write.clone()), args)
                    .persistent(persistent)
                    .fetch_all(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Guarded::Done(Some(rows)))
            })
            .await
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

queries::sql_store!(PostgresStore {
    async fn version(&self) -> Result<Option<u64>, StoreError> {
        Ok(Some(self.check.run(&self.pool, None).await?.version as u64))
    }

    async fn check_version(&self, above: i64) -> Result<Option<VersionReading>, StoreError> {
        Ok(Some(self.check.run(&self.pool, Some(above)).await?.reading()))
    }

    /// While [`listening`](Self::listening) in push mode: the version the listener last read.
    fn known_version(&self) -> Option<u64> {
        self.push.as_ref().and_then(|push| push.known())
    }

    /// Checked and written with the book's row (and its author's) locked.
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Guarded<Option<BookRecord>>, StoreError> {
        let [title, author, year, now] = book_args(book, now);
        let args = [title, author, year, now, Arg::Int(id)];
        let written = self
            .guarded(id, precondition, &self.sql.update, &args)
            .await;
        Ok(match written.or_write_error(book.author_id)? {
            Guarded::Done(Some(rows)) => {
                let book = rows.first().map(|row| row.book().map(Into::into));
                Guarded::Done(book.transpose().or_store_error()?)
            }
            Guarded::Done(None) => Guarded::Done(None),
            Guarded::Refused(current) => Guarded::Refused(current),
        })
    }

    /// Checked and deleted with the book's row (and its author's) locked.
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Guarded<bool>, StoreError> {
        let args = [Arg::Int(id)];
        let written = self
            .guarded(id, precondition, &self.sql.delete, &args)
            .await;
        Ok(match written.or_store_error()? {
            Guarded::Done(rows) => Guarded::Done(rows.is_some_and(|rows| !rows.is_empty())),
            Guarded::Refused(current) => Guarded::Refused(current),
        })
    }
});
