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
//! When the history read moves to a new timeline over the same counter file, and the new
//! primary's replay ended at or past every position this process read, the history told
//! stays the one before and the API's cache keeps its answers. Otherwise it is a new one,
//! and the cache drops every answer: a replay that ended short of a position read (writes
//! the process saw are gone), a primary restarted since its promotion (it no longer says
//! where its replay ended), a new counter file.
//!
//! An answer the cache kept from a read newer than the last version read has no position
//! of its own here; after a lossy promotion it could only be served again if the new
//! history's count reached exactly its count (counts grow by random steps of up to 2^20),
//! the same bound as [`Versions`](books_core::store::Versions) rule 4.

use std::sync::Mutex;

/// Where a version read stood in the WAL, on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    /// The counter table's file.
    pub(crate) file: i64,
    /// Where the WAL ended when the version was read.
    pub(crate) wal: i64,
    /// Where the server's replay ended, if it was promoted since it started.
    pub(crate) replayed: Option<i64>,
}

/// The PostgreSQL columns of a version read giving its [`Position`], in its fields' order
/// (`{s}`: the schema).
pub(crate) const POSITION_SQL: [&str; 3] = [
    "CAST(pg_relation_filenode('{s}book_count') AS BIGINT)",
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
            wal: row.int(first + 1)?,
            replayed: row.maybe_int(first + 2)?,
        })
    }
}

/// The history a store tells, followed across lossless promotions (one per store, shared
/// by its version check and its push listener).
#[derive(Debug, Default)]
pub(crate) struct Lineage(Mutex<Option<Followed>>);

/// The history last read, the one told for it, its counter file and the furthest WAL
/// position read in it.
#[derive(Debug, Clone, Copy)]
struct Followed {
    read: u64,
    told: u64,
    file: i64,
    wal: i64,
}

impl Lineage {
    /// The history to tell for a version read as `read` at `at` (`None`: no position, as
    /// on MariaDB and SQLite, where the history read is told as it is).
    pub(crate) fn tell(&self, read: u64, at: Option<Position>) -> u64 {
        let Some(at) = at else { return read };
        let mut followed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let next = match *followed {
            Some(f) if f.read == read => Followed {
                wal: f.wal.max(at.wal),
                ..f
            },
            Some(f) if f.file == at.file && at.replayed.is_some_and(|end| end >= f.wal) => {
                tracing::info!(
                    replay_ended = at.replayed,
                    read_up_to = f.wal,
                    "the primary is a promoted standby that replayed every write this \
                     process read: the cache keeps its answers"
                );
                Followed {
                    read,
                    wal: f.wal.max(at.wal),
                    ..f
                }
            }
            // A new history; never told as one told before, if the server it came from
            // answers again (a primary cut off, then back).
            Some(f) => Followed {
                read,
                told: if read == f.told { !read } else { read },
                file: at.file,
                wal: at.wal,
            },
            None => Followed {
                read,
                told: read,
                file: at.file,
                wal: at.wal,
            },
        };
        *followed = Some(next);
        next.told
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file: i64, wal: i64, replayed: Option<i64>) -> Option<Position> {
        Some(Position {
            file,
            wal,
            replayed,
        })
    }

    #[test]
    fn a_history_without_positions_is_told_as_read() {
        let lineage = Lineage::default();
        assert_eq!(lineage.tell(7, None), 7);
        assert_eq!(lineage.tell(8, None), 8);
    }

    #[test]
    fn a_promotion_that_replayed_every_position_read_keeps_the_history() {
        let lineage = Lineage::default();
        assert_eq!(lineage.tell(1, at(5, 100, None)), 1);
        assert_eq!(lineage.tell(1, at(5, 300, None)), 1);
        assert_eq!(
            lineage.tell(2, at(5, 320, Some(300))),
            1,
            "replay ended at 300"
        );
        assert_eq!(lineage.tell(2, at(5, 400, Some(300))), 1);
        // A second lossless promotion, measured against what was read on the second.
        assert_eq!(lineage.tell(3, at(5, 450, Some(400))), 1);
    }

    #[test]
    fn a_promotion_short_of_a_position_read_tells_a_new_history() {
        let lineage = Lineage::default();
        lineage.tell(1, at(5, 300, None));
        assert_eq!(lineage.tell(2, at(5, 320, Some(299))), 2, "one write lost");
        // Measured from the new history on.
        assert_eq!(lineage.tell(3, at(5, 400, Some(320))), 2);
    }

    #[test]
    fn a_restarted_primary_or_a_new_counter_file_tells_a_new_history() {
        let lineage = Lineage::default();
        lineage.tell(1, at(5, 300, None));
        assert_eq!(
            lineage.tell(2, at(5, 320, None)),
            2,
            "restarted since promotion"
        );
        assert_eq!(
            lineage.tell(3, at(6, 330, Some(330))),
            3,
            "a restored backup"
        );
    }

    #[test]
    fn the_old_primary_answering_again_is_never_told_as_the_history_kept() {
        let lineage = Lineage::default();
        lineage.tell(1, at(5, 300, None));
        assert_eq!(lineage.tell(2, at(5, 320, Some(300))), 1);
        // The old primary, cut off and still taking writes, answers once more.
        let told = lineage.tell(1, at(5, 350, None));
        assert_ne!(told, 1, "another history than the one kept");
        assert_ne!(lineage.tell(2, at(5, 360, Some(300))), told);
    }
}
