//! Sending again a transaction the database rolled back whole to settle a conflict with
//! another ([`retry_conflicts`]): what the MariaDB store does with its writes, for a
//! host's own store on any of the databases.

use std::time::Duration;

use metrics::counter;

/// How many times in all [`retry_conflicts`] sends a transaction.
pub const CONFLICT_TRIES: u64 = 4;

/// Whether `error` says the database rolled the whole transaction back to settle a
/// conflict with another, and that it may be sent again: SQLSTATE `40001` (MariaDB's
/// deadlock and Galera's certification conflict, both error 1213; PostgreSQL's
/// serialization failure) or `40P01` (PostgreSQL's deadlock).
pub fn is_conflict(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = error else {
        return false;
    };
    #[cfg(feature = "mysql")]
    if crate::error::is_deadlock(error) {
        return true;
    }
    matches!(db.code().as_deref(), Some("40001" | "40P01"))
}

/// Runs `work` (a whole transaction: it begins and commits inside) and, while it fails
/// as [`is_conflict`] says, again: up to [`CONFLICT_TRIES`] times in all, a few
/// milliseconds apart so that the writers that collided do not again. The last error is
/// given back as it is ([`store_error`](crate::store_error) makes it a 503). Each retry
/// counts in `books_store_deadlock_retries_total`.
///
/// ```no_run
/// # #[cfg(feature = "mysql")]
/// # async fn run(pool: books_sqlx::sqlx::MySqlPool) -> Result<(), books_sqlx::sqlx::Error> {
/// books_sqlx::retry_conflicts(|| async {
///     let mut tx = pool.begin().await?;
///     // … the host's statements on `tx` …
///     tx.commit().await
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub async fn retry_conflicts<T, F, Fut>(mut work: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut tries = 1;
    loop {
        match work().await {
            Err(error) if is_conflict(&error) && tries < CONFLICT_TRIES => {
                counter!("books_store_deadlock_retries_total").increment(1);
                let pause = 1 + (u64::from(std::process::id()) + tries) % 5;
                tokio::time::sleep(Duration::from_millis(pause)).await;
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}
