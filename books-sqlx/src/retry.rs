//! Sending again a transaction the database rolled back whole to settle a conflict with
//! another ([`retry_conflicts`]): what the MariaDB and PostgreSQL stores do with their
//! writes, for a host's own store on any of the databases.

use std::hash::{BuildHasher, RandomState};
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
/// because of a conflict ([`is_conflict`] of the error, or of a `sqlx::Error` among its
/// causes, as in this crate's [`Error`](crate::Error) from a part), again: up to
/// [`CONFLICT_TRIES`] times in all, after a pause of 1 to 5 ms drawn at random, so that
/// the writers that collided are unlikely to meet again. The last error is given back
/// as it is ([`store_error`](crate::store_error) makes it a 503). Each retry counts in
/// `books_store_deadlock_retries_total`.
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
pub async fn retry_conflicts<T, E, F, Fut>(mut work: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::error::Error + 'static,
{
    let mut tries = 1;
    loop {
        match work().await {
            Err(error) if caused_by_conflict(&error) && tries < CONFLICT_TRIES => {
                counter!("books_store_deadlock_retries_total").increment(1);
                let pause = 1 + RandomState::new().hash_one(tries) % 5;
                tokio::time::sleep(Duration::from_millis(pause)).await;
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Whether `error`, or an error it was caused by, is a driver error [`is_conflict`].
fn caused_by_conflict(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.downcast_ref::<sqlx::Error>().is_some_and(is_conflict) {
            return true;
        }
        next = error.source();
    }
    false
}
