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
//! [`known_version`]: books_core::BookStore::known_version

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{SqlSafeStr, SqlStr};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout};

use crate::ACQUIRE_TIMEOUT;

/// The channel the triggers notify (payload: the schema written to).
pub const CHANNEL: &str = "books_changed";

/// How often the listener re-reads the version when no notification comes: the bound on
/// staleness when a notification is lost with a connection that did not say so.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long the listener's read may take before it counts the connection as dead.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Wait before reconnecting after the listener's connection failed.
const RECONNECT: Duration = Duration::from_secs(1);

/// "Not known": versions are sums of non-negative `BIGINT`s, never this.
const UNKNOWN: u64 = u64::MAX;

/// The listener of one store (shared by its clones); stops when the last clone drops.
#[derive(Debug)]
pub(crate) struct Push {
    known: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Push {
    /// Starts listening on a connection of its own, opened with `options` (so requests
    /// keep all of the store's `pool`, whose closing stops the listener); `state` reads
    /// the version and whether push mode is on. Needs a tokio runtime.
    pub(crate) fn start(pool: &PgPool, options: PgConnectOptions, state: SqlStr) -> Self {
        let known = Arc::new(AtomicU64::new(UNKNOWN));
        let task = tokio::spawn(listen(pool.clone(), options, state, known.clone()));
        Self { known, task }
    }

    /// The version as last read, while it can be trusted.
    pub(crate) fn known(&self) -> Option<u64> {
        let known = self.known.load(Ordering::Acquire);
        (known != UNKNOWN).then_some(known)
    }
}

impl Drop for Push {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Follows notifications, reconnecting after failures, until the store's pool is closed.
async fn listen(store: PgPool, options: PgConnectOptions, state: SqlStr, known: Arc<AtomicU64>) {
    let set = |version: Option<u64>| known.store(version.unwrap_or(UNKNOWN), Ordering::Release);
    let reconnecting = async {
        loop {
            // A pool of one per attempt: a connection that went silent may stay stuck
            // (sqlx unlistens on it before returning it) without holding up the next.
            let own = PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_lazy_with(options.clone());
            let Err(error) = follow(&own, &state, &set).await;
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
    state: &SqlStr,
    set: &impl Fn(Option<u64>),
) -> Result<std::convert::Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    loop {
        // Read on the listening connection: an answer proves it alive, and every
        // notification received before it is reflected.
        let read = sqlx::query_as::<_, (Option<i64>, bool)>(state.clone()).fetch_one(&mut listener);
        let (version, on) = timeout(PROBE_TIMEOUT, read).await.map_err(|_| {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the listener's read timed out",
            ))
        })??;
        set(on.then(|| version.unwrap_or(0) as u64));
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

/// The listener's read: the version and whether both tables notify.
pub(crate) fn state_sql(schema: &str) -> SqlStr {
    // Safe: `schema` is empty or an identifier checked by the store.
    sqlx::AssertSqlSafe(
        "SELECT (SELECT CAST(SUM(version) AS BIGINT) FROM {s}book_count), \
         (SELECT COUNT(*) FROM pg_trigger WHERE tgname = 'books_notify' AND tgenabled <> 'D' \
          AND tgrelid IN (to_regclass('{s}books'), to_regclass('{s}authors'))) = 2"
            .replace("{s}", schema),
    )
    .into_sql_str()
}
