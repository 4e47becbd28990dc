//! The version check's connection of its own.
//!
//! sqlx 0.9 pings every connection handed back to a pool (one more round trip after
//! every query, on its own task). The version check is exact mode's one query per wave
//! of cached reads, sent back to back under load, so a store that built its pool runs
//! it on a connection kept for it, opened with the pool's options on first use and
//! again after a failure. A store over a host's pool checks through that pool: the
//! host may set its connections up in `after_connect` (a role, a `search_path`, a key),
//! which a connection opened from the options alone would miss. BENCHMARKS.md ("Exact
//! mode: a check per wave of requests") measures the difference.

use std::time::Duration;

use books_core::StoreError;
use sqlx::{ConnectOptions, Database, Executor, FromRow, IntoArguments, Pool, SqlStr};
use tokio::sync::Mutex;
use tokio::time::timeout;

use crate::error::OrStoreError;

/// The longest a check may take, connecting included, before it counts as unavailable
/// (503) and its connection is dropped (a connection that went silent never answers).
pub(crate) const CHECK_TIMEOUT: Duration = crate::ACQUIRE_TIMEOUT;

/// One connection for the version query, shared by a store's clones.
pub(crate) struct CheckConnection<DB: Database>(Mutex<Option<DB::Connection>>);

impl<DB: Database> std::fmt::Debug for CheckConnection<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckConnection").finish_non_exhaustive()
    }
}

impl<DB: Database> Default for CheckConnection<DB> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

/// The version, read by `sql` (one `BIGINT`) on `own` connection if the store has
/// one, else through `pool`. The own connection is opened like `pool`'s when there is
/// none; any failure drops it, so the next check starts on a fresh one, and a closed
/// pool closes it too.
pub(crate) async fn version<DB>(
    own: Option<&CheckConnection<DB>>,
    pool: &Pool<DB>,
    sql: &SqlStr,
) -> Result<i64, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
{
    let Some(own) = own else {
        return sqlx::query_scalar(sql.clone())
            .fetch_one(pool)
            .await
            .or_store_error();
    };
    let mut slot = own.0.lock().await;
    if pool.is_closed() {
        *slot = None;
        return Err(sqlx::Error::PoolClosed).or_store_error();
    }
    let checked = timeout(CHECK_TIMEOUT, async {
        if slot.is_none() {
            *slot = Some(pool.connect_options().connect().await?);
        }
        let conn = slot.as_mut().expect("opened above");
        sqlx::query_scalar(sql.clone()).fetch_one(conn).await
    })
    .await;
    match checked {
        Ok(Ok(version)) => Ok(version),
        Ok(Err(error)) => {
            *slot = None;
            Err(error).or_store_error()
        }
        Err(elapsed) => {
            *slot = None;
            Err(StoreError::unavailable(elapsed))
        }
    }
}
