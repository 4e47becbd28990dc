//! Reads from replicas, never older than the primary when the read began, on any database
//! that says how far a replica has applied the primary's writes ([`Standby`]): WAL
//! positions on PostgreSQL, GTID positions on MariaDB.
//!
//! Every read that may go to a replica (a page, a book) first takes the primary's
//! position from the store's version check connection (a query sent after the read
//! began, shared with the reads that arrive with it). A replica may answer once it has
//! *applied* up to that position: every write acknowledged before the read began is then
//! visible there. The replica's read is one message — its applied position, then the
//! data, each statement with a snapshot of its own, so the data is at least as new as
//! the position it reports: a replica that restarted and went back is caught by what it
//! says, not by what it said before.
//!
//! Which replica: the next in turn among those known to have reached the position (each
//! read and probe updates what is known); when none has, each replica that is up is
//! asked where it stands, again every [`PROBE_INTERVAL`] until one has or the wait runs
//! out, then the primary answers. A replica that fails (down, refusing, a query
//! cancelled by recovery) is left alone for [`DOWN_FOR`] and asked again after that, so
//! it rejoins by itself.
//!
//! Metrics: `books_store_replica_up{replica}` (1 or 0), the lag gauge of the database
//! ([`Standby::LAG_METRIC`]) by `replica`, against the newest primary position seen, and
//! `books_store_replica_fallbacks_total{reason}` (`behind`, `unavailable`); the stores
//! count `books_store_reads_total{pool}`.

use std::fmt::Debug;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use metrics::{counter, gauge};
use sqlx::Pool;

use crate::driver::Driver;
use tokio::time::{sleep, timeout};

/// How long a replica is left alone after it failed.
pub const DOWN_FOR: Duration = Duration::from_secs(1);

/// How often replicas are asked where they stand while a read waits for one.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(2);

/// The default longest wait for a replica to catch up before the primary answers.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(20);

/// The longest a replica's read may take before the replica counts as failed.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How far a server has applied the primary's writes.
pub trait Position: Clone + Debug + Send + Sync + 'static {
    /// Whether every write up to `target` is applied here.
    fn reached(&self, target: &Self) -> bool;
    /// The newer of the two (what both have applied, for positions with several parts).
    fn newest(self, other: &Self) -> Self;
    /// How far this is behind `primary`, in the database's unit.
    fn behind(&self, primary: &Self) -> u64;
    /// As [`ReplicaState::applied`] shows it.
    fn show(&self) -> String;
}

/// A database whose replicas say how far they have applied the primary's writes.
pub trait Standby: Driver {
    type Position: Position;
    /// Reads the primary's position, as [`applied`](Self::applied) decodes it (`None`:
    /// it has none a replica could be measured against).
    const PRIMARY_POSITION: &'static str;
    /// The gauge of a replica's lag (its unit in the name).
    const LAG_METRIC: &'static str;
    /// One message that reads the applied position as its first row, then runs
    /// `statement` (a read, its arguments written in), if any.
    fn read_text(statement: Option<&str>) -> String;
    /// The applied position in a read's first row (`None`: not a replica).
    fn applied(row: &Self::Row) -> Result<Option<Self::Position>, sqlx::Error>;
    /// `host:port`, the metrics' label.
    fn label(pool: &Pool<Self>) -> String;
}

/// What a store knows of one of its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaState {
    /// `host:port`, as in the metrics' `replica` label.
    pub replica: String,
    /// Whether it answered when last asked (a replica that failed is left alone for
    /// [`DOWN_FOR`], then asked again).
    pub up: bool,
    /// How far it had applied the primary's writes when last asked: bytes of WAL on
    /// PostgreSQL, a GTID position on MariaDB.
    pub applied: Option<String>,
    /// How far that was behind the newest primary position the store has seen: bytes
    /// of WAL on PostgreSQL, transactions on MariaDB.
    pub lag: Option<u64>,
    /// Reads it answered for this store.
    pub reads: u64,
}

/// The replicas of one store.
pub(crate) struct Replicas<DB: Standby> {
    members: Vec<Replica<DB>>,
    next: AtomicUsize,
    wait: Duration,
    /// The newest primary position seen (for the lag gauge).
    primary: Mutex<Option<DB::Position>>,
}

struct Replica<DB: Standby> {
    pool: Pool<DB>,
    label: String,
    applied: Mutex<Option<DB::Position>>,
    down_until: Mutex<Option<Instant>>,
    /// Reads it answered.
    reads: AtomicU64,
}

impl<DB: Standby> Debug for Replicas<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicas")
            .field("replicas", &self.states())
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl<DB: Standby> Replicas<DB> {
    pub(crate) fn new(pools: Vec<Pool<DB>>, wait: Duration) -> Self {
        let members = pools
            .into_iter()
            .map(|pool| Replica {
                label: DB::label(&pool),
                pool,
                applied: Mutex::new(None),
                down_until: Mutex::new(None),
                reads: AtomicU64::new(0),
            })
            .collect();
        Self {
            members,
            next: AtomicUsize::new(0),
            wait,
            primary: Mutex::new(None),
        }
    }

    /// The same replicas, waiting at most `wait` for one to catch up.
    pub(crate) fn with_wait(&self, wait: Duration) -> Self {
        Self::new(self.pools(), wait)
    }

    /// The replicas' pools.
    pub(crate) fn pools(&self) -> Vec<Pool<DB>> {
        self.members.iter().map(|r| r.pool.clone()).collect()
    }

    /// What is known of each replica.
    pub(crate) fn states(&self) -> Vec<ReplicaState> {
        let primary = lock(&self.primary).clone();
        self.members
            .iter()
            .map(|r| {
                let applied = lock(&r.applied).clone();
                ReplicaState {
                    replica: r.label.clone(),
                    up: r.is_up() && applied.is_some(),
                    applied: applied.as_ref().map(Position::show),
                    lag: applied
                        .as_ref()
                        .zip(primary.as_ref())
                        .map(|(applied, primary)| applied.behind(primary)),
                    reads: r.reads.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// The next replica in turn that is up and known to have applied `position`.
    fn ready_for(&self, position: &DB::Position) -> Option<&Replica<DB>> {
        let count = self.members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|offset| &self.members[(start + offset) % count])
            .find(|r| {
                r.is_up()
                    && lock(&r.applied)
                        .as_ref()
                        .is_some_and(|applied| applied.reached(position))
            })
    }
}

impl<DB: Standby> Replicas<DB> {
    /// The rows of `statement` (a read, its arguments written in) from a replica that
    /// has applied `position`, or why there is none.
    pub(crate) async fn read(
        &self,
        position: &DB::Position,
        statement: &str,
    ) -> Result<Vec<DB::Row>, Fallback> {
        let primary = {
            let mut newest = lock(&self.primary);
            let merged = match newest.take() {
                Some(seen) => seen.newest(position),
                None => position.clone(),
            };
            *newest = Some(merged.clone());
            merged
        };
        let text = DB::read_text(Some(statement));
        let deadline = Instant::now() + self.wait;
        loop {
            while let Some(replica) = self.ready_for(position) {
                if let Some((applied, mut rows)) = replica.read(&text, &primary).await
                    && applied.reached(position)
                {
                    // The first row is the position the data is at least as new as.
                    rows.remove(0);
                    replica.reads.fetch_add(1, Ordering::Relaxed);
                    return Ok(rows);
                }
            }
            let mut answered = false;
            for replica in self.members.iter().filter(|r| r.is_up()) {
                answered |= replica.probe(&primary).await;
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
}

impl<DB: Standby> Replica<DB> {
    fn is_up(&self) -> bool {
        lock(&self.down_until).is_none_or(|until| Instant::now() >= until)
    }
}

impl<DB: Standby> Replica<DB> {
    /// Runs `text` (whose first statement reads the applied position): that position
    /// and the rows, or `None` when the replica failed (it is then left alone a while).
    async fn read(
        &self,
        text: &str,
        primary: &DB::Position,
    ) -> Option<(DB::Position, Vec<DB::Row>)> {
        let read = async {
            let mut conn = self.pool.acquire().await?;
            let rows = DB::text_rows(&mut conn, text.to_owned()).await;
            if rows.is_err() {
                // Whatever the failed statement left open on it goes with it.
                conn.close_on_drop();
            }
            rows
        };
        let rows = match timeout(READ_TIMEOUT, read).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(error)) => return self.failed(&error.to_string()),
            Err(_) => return self.failed("no answer in time"),
        };
        match rows.first().map(DB::applied) {
            Some(Ok(Some(applied))) => {
                self.answered(&applied, primary);
                Some((applied, rows))
            }
            Some(Ok(None)) => self.failed("not a replica (no applied position)"),
            Some(Err(error)) => self.failed(&error.to_string()),
            None => self.failed("no applied position"),
        }
    }

    /// Asks where the replica stands; whether it answered.
    async fn probe(&self, primary: &DB::Position) -> bool {
        self.read(&DB::read_text(None), primary).await.is_some()
    }

    fn answered(&self, applied: &DB::Position, primary: &DB::Position) {
        *lock(&self.applied) = Some(applied.clone());
        if lock(&self.down_until).take().is_some() {
            tracing::info!(replica = %self.label, "replica answers again");
        }
        gauge!("books_store_replica_up", "replica" => self.label.clone()).set(1.0);
        gauge!(DB::LAG_METRIC, "replica" => self.label.clone()).set(applied.behind(primary) as f64);
    }

    fn failed<T>(&self, why: &str) -> Option<T> {
        *lock(&self.applied) = None;
        let mut down_until = lock(&self.down_until);
        if down_until.is_none() {
            tracing::warn!(replica = %self.label, error = why, "replica left out; the primary answers its reads");
        }
        *down_until = Some(Instant::now() + DOWN_FOR);
        gauge!("books_store_replica_up", "replica" => self.label.clone()).set(0.0);
        None
    }
}

/// A PostgreSQL position: bytes from the start of the WAL.
impl Position for i64 {
    fn reached(&self, target: &Self) -> bool {
        self >= target
    }

    fn newest(self, other: &Self) -> Self {
        self.max(*other)
    }

    fn behind(&self, primary: &Self) -> u64 {
        u64::try_from(primary.saturating_sub(*self)).unwrap_or(0)
    }

    fn show(&self) -> String {
        self.to_string()
    }
}
