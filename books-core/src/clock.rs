//! The injectable clock: the year rule, timestamps and the extended ping read it.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};

/// A source of the current time: the year rule, timestamps and the extended ping read it.
pub trait Clock: Debug + Send + Sync + 'static {
    /// The current instant in UTC.
    fn now(&self) -> DateTime<Utc>;

    /// Whole seconds since the Unix epoch: all the extended ping asks of most requests
    /// (it renders again once a second). Override it where `now` is costly.
    fn unix_seconds(&self) -> i64 {
        self.now().timestamp()
    }
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    /// Without chrono's calendar arithmetic: a third of what `now` costs.
    fn unix_seconds(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => since.as_secs() as i64,
            Err(_) => self.now().timestamp(),
        }
    }
}

/// A clock that reads a time set by hand; clones share the same time (for tests).
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock stopped at `now`.
    pub fn new(now: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(now)))
    }

    /// Moves the clock (and every clone of it) to `now`.
    pub fn set(&self, now: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
