//! Streaming replicas ([`crate::replicas`]): PostgreSQL's positions are bytes of WAL,
//! and a replica tells how far it has replayed.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow, Postgres};

use books_core::store::StoreError;

use super::session::local_settings;
use crate::Error;
use crate::check::{OnConnection, VersionCheck};
use crate::replicas::{DEFAULT_WAIT, ReplicaState, Replicas, Standby};

/// The replay position, as bytes from the start of the WAL (null off a standby).
const REPLAYED: &str = "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint";

/// The primary's WAL position, in bytes, read now on the version check's connection
/// (what a replica must have replayed before it may answer a read).
pub(super) async fn primary_position(
    check: &VersionCheck<Postgres>,
    pool: &PgPool,
) -> Result<i64, StoreError> {
    const POSITION: &str = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";
    let query: OnConnection<i64, Postgres> = Box::new(|conn| {
        Box::pin(async move { sqlx::raw_sql(POSITION).fetch_one(conn).await?.try_get(0) })
    });
    check.run(pool, query).await
}

impl Standby for Postgres {
    type Position = i64;
    const LAG_METRIC: &'static str = "books_store_replica_lag_bytes";

    fn read_text(statement: Option<&str>) -> String {
        match statement {
            Some(statement) => format!("{}; {REPLAYED}; {statement}", local_settings()),
            None => format!("{}; {REPLAYED}", local_settings()),
        }
    }

    fn applied(row: &PgRow) -> Result<Option<i64>, sqlx::Error> {
        row.try_get(0)
    }

    fn label(pool: &PgPool) -> String {
        let options = pool.connect_options();
        format!("{}:{}", options.get_host(), options.get_port())
    }
}

/// Replicas, on the store.
impl super::PostgresStore {
    /// This store reading from `replicas`, streaming replicas of the primary: pages and
    /// books are read there once a replica has replayed the primary's WAL position as
    /// the read began (so no read is older than a write acknowledged before it, by any
    /// process), else after a short wait ([`replica_wait`](Self::replica_wait)) from the
    /// primary. Writes, version checks, migrations and `LISTEN` stay on the primary. A
    /// replica that is down or lagging costs latency, never an error; it is asked again
    /// after [`DOWN_FOR`](crate::DOWN_FOR). See [`replica_pool`](Self::replica_pool) for pools of the
    /// store's own making.
    pub fn with_replicas(self, replicas: Vec<PgPool>) -> Self {
        let replicas =
            (!replicas.is_empty()).then(|| Arc::new(Replicas::new(replicas, DEFAULT_WAIT)));
        Self { replicas, ..self }.rebuilt()
    }

    /// How long a read waits for a replica to catch up before the primary answers it
    /// (default [`DEFAULT_REPLICA_WAIT`](crate::DEFAULT_REPLICA_WAIT)).
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
}
