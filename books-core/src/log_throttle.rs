//! Warnings that repeat (a store unavailable for every request of an outage, a search
//! that finds no primary every quarter second) logged at most once per interval, with how
//! many were held back since the last line.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one log line per interval for one kind of event.
///
/// ```
/// use books_core::LogThrottle;
/// use std::time::Duration;
/// static UNAVAILABLE: LogThrottle = LogThrottle::new(Duration::from_secs(5));
/// assert_eq!(UNAVAILABLE.allow(), Some(0)); // log it, nothing held back
/// assert_eq!(UNAVAILABLE.allow(), None); // held back
/// ```
#[derive(Debug)]
pub struct LogThrottle {
    every: Duration,
    /// When the next line may be logged, and how many were held back since the last.
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogThrottle {
    /// One line per `every` at most.
    pub const fn new(every: Duration) -> Self {
        Self {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Whether to log the event now: `Some(held_back)`, the events not logged since the
    /// last line; `None` to hold this one back (it is counted).
    pub fn allow(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if state.0.is_some_and(|next| now < next) {
            state.1 += 1;
            return None;
        }
        state.0 = now.checked_add(self.every);
        Some(std::mem::take(&mut state.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let throttle = LogThrottle::new(Duration::from_millis(50));
        assert_eq!(throttle.allow(), Some(0));
        for _ in 0..3 {
            assert_eq!(throttle.allow(), None);
        }
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(throttle.allow(), Some(3));
        assert_eq!(throttle.allow(), None);
    }
}
