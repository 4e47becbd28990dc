//! Streaming replicas ([`crate::servers::replicas`]): PostgreSQL's positions are bytes of
//! WAL, and a replica tells how far it has replayed.

use sqlx::Row;
use sqlx::postgres::{PgPool, PgRow, Postgres};

use super::session::local_settings;
use crate::servers::replicas::Standby;

/// The replay position, as bytes from the start of the WAL (null off a standby).
const REPLAYED: &str = "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint";

impl Standby for Postgres {
    type Position = i64;
    const PRIMARY_POSITION: &'static str =
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";
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
