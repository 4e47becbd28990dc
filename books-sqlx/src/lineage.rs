//! A PostgreSQL history followed across a promotion that lost nothing.
//!
//! The version's history names the timeline (a promoted standby starts a new one) and the
//! counter table's file (a restore writes a new one). A new timeline alone does not mean
//! writes were lost: a standby promoted after it replayed everything its primary had (a
//! switchover, a primary stopped cleanly) holds every state this process ever read. So
//! each version read on PostgreSQL also reads where the WAL ends
//! (`pg_current_wal_insert_lsn()`, at or past the commit of every write the read sees) and,
//! on a promoted standby, where its replay ended (`pg_last_wal_replay_lsn()`).
//!
//! When the history read moves to a later timeline over the same counter file, the new
//! primary's replay ended at or past every position this process read, and no data read
//! since the last position found another count (an answer the cache may keep, of a state
//! whose position nobody read), the history told stays the one before and the API's
//! cache keeps its answers. Otherwise it is a new one, never told before, and the cache
//! drops every answer: a replay that ended short of a position read (writes the process
//! saw are gone), a primary restarted since its promotion (it no longer says where its
//! replay ended), an earlier timeline (an old primary back after its crash recovery, which
//! also says where its replay ended), a new counter file, a read not covered.
//!
//! What this cannot see: a server promoted from a timeline other than the one this
//! process read last (a standby that never followed the new primary, promoted by hand
//! beside it). PostgreSQL keeps each timeline's parent only in files an unprivileged
//! session cannot read.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a version read stood in the WAL, on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    /// The counter table's file.
    pub(crate) file: i64,
    /// The server's timeline.
    pub(crate) timeline: i64,
    /// Where the WAL ended when the version was read.
    pub(crate) wal: i64,
    /// Where the server's replay ended, if it was promoted (or recovered) since it started.
    pub(crate) replayed: Option<i64>,
}

/// The PostgreSQL columns of a version read giving its [`Position`], in its fields' order
/// (`{s}`: the schema).
pub(crate) const POSITION_SQL: [&str; 4] = [
    "CAST(pg_relation_filenode('{s}book_count') AS BIGINT)",
    "CAST(CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS bit(32)) \
     AS INT) AS BIGINT)",
    "CAST(pg_current_wal_insert_lsn() - '0/0'::pg_lsn AS BIGINT)",
    "CAST(pg_last_wal_replay_lsn() - '0/0'::pg_lsn AS BIGINT)",
];

impl Position {
    /// The position in a row's columns from `first` on, as [`POSITION_SQL`] reads it.
    pub(crate) fn read<R: crate::rows::StoreRow>(
        row: &R,
        first: usize,
    ) -> Result<Self, sqlx::Error> {
        Ok(Self {
            file: row.int(first)?,
            timeline: row.int(first + 1)?,
            wal: row.int(first + 2)?,
            replayed: row.maybe_int(first + 3)?,
        })
    }
}

/// The history a store tells, followed across lossless promotions (one per store, shared
/// by its version check and its push listener).
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    state: Mutex<State>,
    /// Data reads that found another count than the last position's, ever.
    reads: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    followed: Option<Followed>,
    /// How many histories were told, ever: each new one is told as a value of its own.
    histories: u64,
}

/// The history last read, the one told for it, its counter file and timeline, the
/// furthest WAL position read in it, the count at the last position, and the reads the
/// last position covers.
#[derive(Debug, Clone, Copy)]
struct Followed {
    read: u64,
    told: u64,
    file: i64,
    timeline: i64,
    wal: i64,
    count: u64,
    covered: u64,
}

impl Lineage {
    /// How many data reads found another count than the last position's so far: a
    /// version read sent now covers those.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Acquire)
    }

    /// A data read found the version's count at `count`: unless that is the count of the
    /// last position, a state whose position nobody read yet.
    pub(crate) fn read_at(&self, count: u64) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.followed.is_some_and(|f| f.count != count) {
            self.reads.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The history to tell for a version read as `read` at `at`, with count `count`, by
    /// a statement sent when [`reads`](Self::reads) was `covered` (`at` `None`: no
    /// position, as on MariaDB and SQLite, where the history read is told as it is).
    pub(crate) fn tell(&self, read: u64, at: Option<Position>, count: u64, covered: u64) -> u64 {
        let Some(at) = at else { return read };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let moved_on = |f: Followed, told| Followed {
            read,
            told,
            file: at.file,
            timeline: at.timeline,
            wal: f.wal.max(at.wal),
            count,
            covered: f.covered.max(covered),
        };
        let next = match state.followed {
            Some(f) if f.read == read => moved_on(f, f.told),
            Some(f)
                if f.file == at.file
                    && at.timeline > f.timeline
                    && at.replayed.is_some_and(|end| end >= f.wal)
                    && f.covered == self.reads() =>
            {
                tracing::info!(
                    replay_ended = at.replayed,
                    read_up_to = f.wal,
                    "the primary is a promoted standby that replayed every write this \
                     process read: the cache keeps its answers"
                );
                moved_on(f, f.told)
            }
            // A new history, told as no history before it (the server it came from may
            // answer again: a primary cut off, then back).
            followed => {
                let told = match followed {
                    Some(_) => {
                        state.histories += 1;
                        read ^ state.histories.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    }
                    None => read,
                };
                Followed {
                    read,
                    told,
                    file: at.file,
                    timeline: at.timeline,
                    wal: at.wal,
                    count,
                    covered,
                }
            }
        };
        state.followed = Some(next);
        next.told
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(timeline: i64, wal: i64, replayed: Option<i64>) -> Option<Position> {
        Some(Position {
            file: 5,
            timeline,
            wal,
            replayed,
        })
    }

    #[test]
    fn a_history_without_positions_is_told_as_read() {
        let lineage = Lineage::default();
        assert_eq!(lineage.tell(7, None, 1, 0), 7);
        assert_eq!(lineage.tell(8, None, 2, 0), 8);
    }

    #[test]
    fn a_promotion_that_replayed_every_position_read_keeps_the_history() {
        let lineage = Lineage::default();
        assert_eq!(lineage.tell(1, at(1, 100, None), 10, 0), 1);
        assert_eq!(lineage.tell(1, at(1, 300, None), 20, 0), 1);
        lineage.read_at(20);
        assert_eq!(
            lineage.reads(),
            0,
            "a read at the position's count is covered"
        );
        let kept = lineage.tell(2, at(2, 320, Some(300)), 30, 0);
        assert_eq!(kept, 1, "replay ended at 300");
        assert_eq!(lineage.tell(2, at(2, 400, Some(300)), 40, 0), 1);
        // A second lossless promotion, measured against what was read on the second.
        assert_eq!(lineage.tell(3, at(3, 450, Some(400)), 50, 0), 1);
    }

    #[test]
    fn a_promotion_short_of_a_position_read_tells_a_new_history() {
        let lineage = Lineage::default();
        lineage.tell(1, at(1, 300, None), 10, 0);
        let new = lineage.tell(2, at(2, 320, Some(299)), 20, 0);
        assert_ne!(new, 1, "one write lost");
        // Measured from the new history on.
        assert_eq!(lineage.tell(3, at(3, 400, Some(320)), 30, 0), new);
    }

    #[test]
    fn a_read_no_position_covers_tells_a_new_history() {
        let lineage = Lineage::default();
        lineage.tell(1, at(1, 300, None), 10, 0);
        lineage.read_at(11);
        assert_eq!(lineage.reads(), 1);
        assert_ne!(lineage.tell(2, at(2, 320, Some(300)), 20, 0), 1);
        // A position sent after the read covers it.
        let lineage = Lineage::default();
        lineage.tell(1, at(1, 300, None), 10, 0);
        lineage.read_at(11);
        lineage.tell(1, at(1, 310, None), 11, 1);
        assert_eq!(lineage.tell(2, at(2, 320, Some(310)), 20, 1), 1);
    }

    #[test]
    fn a_restarted_primary_a_new_counter_file_or_an_earlier_timeline_tells_a_new_history() {
        let lineage = Lineage::default();
        lineage.tell(1, at(1, 300, None), 10, 0);
        let restarted = lineage.tell(2, at(2, 320, None), 20, 0);
        assert_ne!(restarted, 1, "restarted since promotion");
        let restored = Some(Position {
            file: 6,
            timeline: 3,
            wal: 330,
            replayed: Some(330),
        });
        let other = lineage.tell(3, restored, 5, 0);
        assert_ne!(other, restarted, "a restored backup");
        // The old primary of timeline 1, recovered after its crash, says where its replay
        // ended too.
        let back = lineage.tell(1, at(1, 400, Some(400)), 30, 0);
        assert!(![1, restarted, other].contains(&back), "{back}");
    }

    #[test]
    fn no_history_is_told_twice() {
        let lineage = Lineage::default();
        let mut told = vec![lineage.tell(1, at(1, 300, None), 10, 0)];
        assert_eq!(lineage.tell(2, at(2, 320, Some(300)), 20, 0), 1);
        // The old primary, cut off and still taking writes, and the new one, in turn.
        for (read, timeline, wal) in [(1, 1, 350), (2, 2, 360), (1, 1, 370), (2, 2, 380)] {
            let history = lineage.tell(read, at(timeline, wal, Some(300)), wal as u64, 0);
            assert!(!told.contains(&history), "{history} told again");
            told.push(history);
        }
    }
}
