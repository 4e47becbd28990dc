//! Reads from streaming replicas, never older than the primary when the read began.
//!
//! Every read that may go to a replica (a page, a book) first takes the primary's WAL
//! position from the store's version check (a check sent after the read began, shared
//! with the reads that arrive with it). A replica may answer once it has *replayed* up
//! to that position: every write acknowledged before the read began is then visible
//! there. The replica's read is one message — its replay position, then the data, each
//! statement with a snapshot of its own, so the data is at least as new as the position
//! it reports: a replica that restarted and went back in its WAL is caught by what it
//! says, not by what it said before.
//!
//! Which replica: the next in turn among those known to have reached the position (each
//! read and probe updates what is known); when none has, each replica that is up is
//! asked where it stands, again every [`PROBE_INTERVAL`] until one has or the wait
//! ([`PostgresStore::replica_wait`](crate::PostgresStore::replica_wait)) runs out, then the
//! primary answers. A replica that fails (down, refusing, a query cancelled by recovery)
//! is left alone for [`DOWN_FOR`] and asked again after that, so it rejoins by itself.
//!
//! Metrics: `books_store_replica_up{replica}` (1 or 0), `books_store_replica_lag_bytes
//! {replica}` (WAL the replica had yet to replay when last asked, against the newest
//! primary position seen) and `books_store_replica_fallbacks_total{reason}` (`behind`,
//! `unavailable`); the store counts `books_store_reads_total{pool}`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use metrics::{counter, gauge};
use sqlx::postgres::{PgPool, PgRow};
use sqlx::{AssertSqlSafe, Row};
use tokio::time::{sleep, timeout};

use super::session::local_settings;
use crate::STATEMENT_TIMEOUT;

/// How long a replica is left alone after it failed.
pub const DOWN_FOR: Duration = Duration::from_secs(1);

/// How often replicas are asked where they stand while a read waits for one.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(2);

/// The default longest wait for a replica to catch up before the primary answers.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(20);

/// The replay position, as bytes from the start of the WAL (null off a standby).
const REPLAYED: &str = "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint";

/// "Not known" for a position.
const UNKNOWN: i64 = -1;

/// The replicas of one store.
#[derive(Debug)]
pub(crate) struct Replicas {
    members: Vec<Replica>,
    next: AtomicUsize,
    wait: Duration,
    /// The newest primary position seen (for the lag gauge).
    primary: AtomicI64,
}

#[derive(Debug)]
struct Replica {
    pool: PgPool,
    /// `host:port`, the metrics' label.
    label: String,
    replayed: AtomicI64,
    down_until: Mutex<Option<Instant>>,
    /// Reads it answered.
    reads: AtomicU64,
}

/// What a store knows of one of its replicas ([`PostgresStore::replicas`]).
///
/// [`PostgresStore::replicas`]: crate::PostgresStore::replicas
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaState {
    /// `host:port`, as in the metrics' `replica` label.
    pub replica: String,
    /// Whether it answered when last asked (a replica that failed is left alone for
    /// [`DOWN_FOR`], then asked again).
    pub up: bool,
    /// How far it had replayed the WAL when last asked, in bytes.
    pub replayed: Option<u64>,
    /// How far that was behind the newest primary position the store has seen.
    pub lag_bytes: Option<u64>,
    /// Reads it answered for this store.
    pub reads: u64,
}

/// Why the primary answered instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Replicas answered, but none had reached the position within the wait.
    Behind,
    /// No replica answered.
    Unavailable,
}

impl Fallback {
    fn label(self) -> &'static str {
        match self {
            Self::Behind => "behind",
            Self::Unavailable => "unavailable",
        }
    }
}

impl Replicas {
    pub(crate) fn new(pools: Vec<PgPool>, wait: Duration) -> Self {
        let members = pools
            .into_iter()
            .map(|pool| {
                let options = pool.connect_options();
                Replica {
                    label: format!("{}:{}", options.get_host(), options.get_port()),
                    pool,
                    replayed: AtomicI64::new(UNKNOWN),
                    down_until: Mutex::new(None),
                    reads: AtomicU64::new(0),
                }
            })
            .collect();
        Self {
            members,
            next: AtomicUsize::new(0),
            wait,
            primary: AtomicI64::new(UNKNOWN),
        }
    }

    /// The same replicas, waiting at most `wait` for one to catch up.
    pub(crate) fn with_wait(&self, wait: Duration) -> Self {
        Self::new(self.pools(), wait)
    }

    /// The replicas' pools.
    pub(crate) fn pools(&self) -> Vec<PgPool> {
        self.members.iter().map(|r| r.pool.clone()).collect()
    }

    /// The rows of `statement` (a read, its arguments written in) from a replica that
    /// has replayed `position`, or why there is none.
    pub(crate) async fn read(
        &self,
        position: i64,
        statement: &str,
    ) -> Result<Vec<PgRow>, Fallback> {
        self.primary.fetch_max(position, Ordering::Relaxed);
        let text = format!("{}; {REPLAYED}; {statement}", local_settings());
        let deadline = Instant::now() + self.wait;
        loop {
            while let Some(replica) = self.ready_for(position) {
                if let Some((replayed, mut rows)) = replica.read(&text, self.primary()).await
                    && replayed >= position
                {
                    // The first row is the position the data is at least as new as.
                    rows.remove(0);
                    replica.reads.fetch_add(1, Ordering::Relaxed);
                    return Ok(rows);
                }
            }
            let mut answered = false;
            for replica in self.members.iter().filter(|r| r.is_up()) {
                answered |= replica.probe(self.primary()).await;
            }
            if self.ready_for(position).is_some() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !answered || left.is_zero() {
                let why = if answered {
                    Fallback::Behind
                } else {
                    Fallback::Unavailable
                };
                counter!("books_store_replica_fallbacks_total", "reason" => why.label())
                    .increment(1);
                return Err(why);
            }
            sleep(PROBE_INTERVAL.min(left)).await;
        }
    }

    /// What is known of each replica.
    pub(crate) fn states(&self) -> Vec<ReplicaState> {
        let primary = self.primary();
        self.members
            .iter()
            .map(|r| {
                let replayed = u64::try_from(r.replayed.load(Ordering::Relaxed)).ok();
                ReplicaState {
                    replica: r.label.clone(),
                    up: r.is_up() && replayed.is_some(),
                    replayed,
                    lag_bytes: replayed
                        .zip(u64::try_from(primary).ok())
                        .map(|(replayed, primary)| primary.saturating_sub(replayed)),
                    reads: r.reads.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    fn primary(&self) -> i64 {
        self.primary.load(Ordering::Relaxed)
    }

    /// The next replica in turn that is up and known to have replayed `position`.
    fn ready_for(&self, position: i64) -> Option<&Replica> {
        let count = self.members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|offset| &self.members[(start + offset) % count])
            .find(|r| r.is_up() && r.replayed.load(Ordering::Relaxed) >= position)
    }
}

impl Replica {
    fn is_up(&self) -> bool {
        let down_until = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        down_until.is_none_or(|until| Instant::now() >= until)
    }

    /// Runs `text` (whose first statement reads the replay position): that position and
    /// the rows, or `None` when the replica failed (it is then left alone for a while).
    async fn read(&self, text: &str, primary: i64) -> Option<(i64, Vec<PgRow>)> {
        let read = sqlx::raw_sql(AssertSqlSafe(text.to_owned())).fetch_all(&self.pool);
        let rows = match timeout(STATEMENT_TIMEOUT, read).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(error)) => return self.failed(&error.to_string()),
            Err(_) => return self.failed("no answer in time"),
        };
        match rows.first().map(|row| row.try_get::<Option<i64>, _>(0)) {
            Some(Ok(Some(replayed))) => {
                self.answered(replayed, primary);
                Some((replayed, rows))
            }
            Some(Ok(None)) => self.failed("not a standby (no replay position)"),
            Some(Err(error)) => self.failed(&error.to_string()),
            None => self.failed("no replay position"),
        }
    }

    /// Asks where the replica stands; whether it answered.
    async fn probe(&self, primary: i64) -> bool {
        let text = format!("{}; {REPLAYED}", local_settings());
        self.read(&text, primary).await.is_some()
    }

    fn answered(&self, replayed: i64, primary: i64) {
        self.replayed.store(replayed, Ordering::Relaxed);
        let was_down = self
            .down_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some();
        if was_down {
            tracing::info!(replica = %self.label, "replica answers again");
        }
        gauge!("books_store_replica_up", "replica" => self.label.clone()).set(1.0);
        gauge!("books_store_replica_lag_bytes", "replica" => self.label.clone())
            .set(primary.saturating_sub(replayed).max(0) as f64);
    }

    fn failed<T>(&self, why: &str) -> Option<T> {
        self.replayed.store(UNKNOWN, Ordering::Relaxed);
        let mut down_until = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        if down_until.is_none() {
            tracing::warn!(replica = %self.label, error = why, "replica left out; the primary answers its reads");
        }
        *down_until = Some(Instant::now() + DOWN_FOR);
        gauge!("books_store_replica_up", "replica" => self.label.clone()).set(0.0);
        None
    }
}
