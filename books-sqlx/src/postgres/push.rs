//! PostgreSQL push mode: a listener that keeps the store's version current in this
//! process, so the API's cache needs no version query per request.
//!
//! While push mode is on for the database ([`PostgresStore::set_push`]), triggers on
//! `books` and `authors` notify channel [`CHANNEL`] with every committed write. The
//! listener holds one connection: it `LISTEN`s, then reads the version and whether push
//! mode is on *on that connection*, and again after every batch of notifications and
//! every [`HEARTBEAT`]. It trusts what it read only while push mode is on and the
//! connection answers; otherwise the store's [`known_version`] is `None` and the API
//! falls back to asking the database.
//!
//! Staleness: a write committed at `t` is known once its notification arrived and the
//! read that follows it answered (one round trip); a connection that dies silently is
//! noticed within [`HEARTBEAT`] plus [`PROBE_TIMEOUT`].
//!
//! [`PostgresStore::set_push`]: crate::PostgresStore::set_push
//! [`PostgresStore::listening`]: crate::PostgresStore::listening
//! [`known_version`]: books_core::store::Versions::known_version

use std::sync::{Arc, Mutex};
use std::time::Duration;

use books_core::store::Version;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout};

use super::PostgresStore;
use crate::lineage::{Lineage, POSITION_SQL, Position};
use crate::rows::StoreRow;
use crate::{ACQUIRE_TIMEOUT, Error};

/// The channel the triggers notify (payload: the schema written to).
pub const CHANNEL: &str = "books_changed";

/// How often the listener re-reads the version when no notification comes: the bound on
/// staleness when a notification is lost with a connection that did not say so.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long the listener's read may take before it counts the connection as dead.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Wait before reconnecting after the listener's connection failed.
const RECONNECT: Duration = Duration::from_secs(1);

/// The listener of one store (shared by its clones); stops when the last clone drops.
#[derive(Debug)]
pub(crate) struct Push {
    known: Arc<Mutex<Option<Version>>>,
    task: JoinHandle<()>,
}

impl Push {
    /// Starts listening on a connection of its own, opened with `options` or, without,
    /// the store `pool`'s as they stand at each connection (they follow the primary
    /// through a failover); requests keep all of the pool, whose closing stops the
    /// listener. `state` reads the version and whether push mode is on; `lineage` tells
    /// the history as the store's check does. Needs a tokio runtime.
    pub(crate) fn start(
        pool: &PgPool,
        options: Option<PgConnectOptions>,
        state: SqlStr,
        lineage: Arc<Lineage>,
    ) -> Self {
        let known = Arc::default();
        let reader = Reader { state, lineage };
        let task = tokio::spawn(listen(pool.clone(), options, reader, Arc::clone(&known)));
        Self { known, task }
    }

    /// The version as last read, while it can be trusted.
    pub(crate) fn known(&self) -> Option<Version> {
        *self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Push {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The listener's read of the version, and the history the store tells for it.
struct Reader {
    state: SqlStr,
    lineage: Arc<Lineage>,
}

/// Follows notifications, reconnecting after failures, until the store's pool is closed.
async fn listen(
    store: PgPool,
    options: Option<PgConnectOptions>,
    reader: Reader,
    known: Arc<Mutex<Option<Version>>>,
) {
    let set = |version: Option<Version>| *known.lock().unwrap_or_else(|e| e.into_inner()) = version;
    let reconnecting = async {
        loop {
            // A pool of one per attempt: a connection that went silent may stay stuck
            // (sqlx unlistens on it before returning it) without holding up the next.
            let options = options
                .clone()
                .unwrap_or_else(|| (*store.connect_options()).clone());
            let own = PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_lazy_with(options);
            let Err(error) = follow(&own, &reader, &set).await;
            set(None);
            tracing::warn!(%error, "push listener lost its connection; asking the database meanwhile");
            sleep(RECONNECT).await;
        }
    };
    tokio::select! {
        () = store.close_event() => set(None),
        () = reconnecting => {}
    }
}

/// Follows notifications on one connection until it fails.
async fn follow(
    pool: &PgPool,
    reader: &Reader,
    set: &impl Fn(Option<Version>),
) -> Result<std::convert::Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    loop {
        // Read on the listening connection: an answer proves it alive, and every
        // notification received before it is reflected.
        let covered = reader.lineage.reads();
        let read = sqlx::query(reader.state.clone()).fetch_one(&mut listener);
        let row = timeout(PROBE_TIMEOUT, read).await.map_err(|_| {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the listener's read timed out",
            ))
        })??;
        let (count, history, on) = (row.maybe_int(0)?, row.int(1)?, row.flag(2)?);
        let (at, count) = (Position::read(&row, 3)?, count.unwrap_or(0) as u64);
        let history = reader
            .lineage
            .tell(history as u64, Some(at), count, covered);
        set(on.then(|| Version::new(history, count)));
        match timeout(HEARTBEAT, listener.try_recv()).await {
            // A heartbeat: read again.
            Err(_) => {}
            // Notifications: one read answers for every one that has arrived.
            Ok(Ok(Some(_))) => while listener.next_buffered().is_some() {},
            // Reconnected (and listening again): notifications may have been missed.
            Ok(Ok(None)) => set(None),
            Ok(Err(error)) => return Err(error),
        }
    }
}

/// The listener's read: the version's count and history (as the version check reads
/// them), whether both tables notify, and the version's [`Position`]. A listener that
/// reconnected to another server (a failover) reads another history, which the store
/// tells as the one before only after a promotion that lost nothing (see
/// [`Lineage`]).
pub(crate) fn state_sql(schema: &str) -> SqlStr {
    let sql = format!(
        "SELECT (SELECT CAST(SUM(version) AS BIGINT) FROM {{s}}book_count), {}, \
         (SELECT COUNT(*) FROM pg_trigger WHERE tgname = 'books_notify' AND tgenabled <> 'D' \
          AND tgrelid IN (to_regclass('{{s}}books'), to_regclass('{{s}}authors'))) = 2, {}",
        crate::check::history_sql(crate::statement::Dialect::Postgres),
        POSITION_SQL.join(", ")
    );
    // Safe: `schema` is empty or an identifier checked by the store.
    AssertSqlSafe(sql.replace("{s}", schema)).into_sql_str()
}

/// Connection options, without printing the password.
#[derive(Clone)]
pub(super) struct Notify(Box<PgConnectOptions>);

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Notify({}:{})", self.0.get_host(), self.0.get_port())
    }
}

/// Push mode, on the store: the database's side ([`set_push`](PostgresStore::set_push)) and
/// this process's ([`listening`](PostgresStore::listening)).
impl PostgresStore {
    /// This store's push listener connects with `options` (a direct connection to the
    /// primary) instead of the pool's: behind a transaction pooler, `LISTEN` needs one.
    pub fn notify_with(mut self, options: PgConnectOptions) -> Self {
        self.extra.notify = Some(Notify(Box::new(options)));
        self
    }

    /// This store with a push listener (a tokio task on one connection of its own, opened
    /// with the pool's options or [`notify_with`](Self::notify_with)'s; call inside a
    /// tokio runtime). While push mode is on for the database
    /// ([`set_push`](Self::set_push)) and the listener is connected, the API's cache takes
    /// the version the listener last read ([`Versions::known_version`](books_core::store::Versions::known_version)) instead of
    /// asking per request: cached reads cost no query, but may be as old as the
    /// staleness bound in [`push`](crate::push) (typically one notification and one round
    /// trip; at most [`HEARTBEAT`](crate::push::HEARTBEAT) plus
    /// [`PROBE_TIMEOUT`](crate::push::PROBE_TIMEOUT) when a connection dies silently). Otherwise
    /// the cache asks, exactly as without a listener. The listener stops when the last
    /// clone of the store is dropped or the pool is closed. Behind a
    /// [pooler](Self::transaction_pooler) without [`notify_with`](Self::notify_with)
    /// there is no connection to listen on: the store logs why and stays exact.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it spawns the listener's task).
    pub fn listening(mut self) -> Self {
        let options = match (&self.extra.notify, self.extra.session.pooler) {
            (Some(Notify(direct)), _) => Some((**direct).clone()),
            (None, false) => None,
            (None, true) => {
                tracing::error!(
                    "push mode needs a direct connection for LISTEN, which a transaction \
                     pooler cannot give (notify_with): this store asks the database instead"
                );
                return self;
            }
        };
        let state = state_sql(&self.prefix());
        let lineage = self.extra.lineage.clone();
        self.extra.push = Some(Arc::new(Push::start(
            &self.servers.pool,
            options,
            state,
            lineage,
        )));
        self
    }

    /// Turns push mode on or off for the database — every process and every writer,
    /// the host's own SQL included — by attaching or dropping the `books_notify`
    /// triggers (needs the right to alter the tables), and tells listeners at once.
    /// Every write then notifies: PostgreSQL commits notifying transactions one at a
    /// time, so writes slow down (BENCHMARKS.md measures by how much); it suits
    /// read-mostly deployments. Safe to repeat.
    pub async fn set_push(&self, on: bool) -> Result<(), Error> {
        let s = self.prefix();
        let mut tx = self.extra.session.begin(&self.servers.pool).await?;
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
            .persistent(self.persistent())
            .bind(CHANNEL)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
