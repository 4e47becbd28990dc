use sqlx::MySqlPool;
use sqlx::migrate::{Migrate, MigrateError, Migrator};

use super::*;

/// The lock migrations are run under, one per database. sqlx's own MySQL lock asks
/// `GET_LOCK(…, -1)`, which MySQL reads as "wait forever" and MariaDB answers at once
/// with NULL (no lock): a year is as long.
const LOCK: &str = "CONCAT('books-migrations:', LEFT(MD5(DATABASE()), 24))";

/// Applies `migrator` through `pool`, a pool of one connection, holding a migration
/// lock ([`LOCK`]) on that connection throughout, so processes that start together
/// migrate one at a time. MariaDB's DDL commits as it
/// goes, so a migration cut in half (a crash, a lost connection) stays marked
/// unfinished in the bookkeeping and has created part of what it creates; every
/// statement of ours is written to be run again, so the mark is cleared and the
/// migration run again in full.
pub(crate) async fn run(pool: &MySqlPool, mut migrator: Migrator) -> Result<(), crate::Error> {
    let mut conn = pool.acquire().await?;
    let locked: Option<i64> =
        sqlx::query_scalar(AssertSqlSafe(format!("SELECT GET_LOCK({LOCK}, 31536000)")))
            .fetch_one(&mut *conn)
            .await?;
    if locked != Some(1) {
        return Err(MigrateError::Execute(sqlx::Error::Protocol(
            "the migration lock was not granted".into(),
        ))
        .into());
    }
    conn.ensure_migrations_table(MIGRATIONS_TABLE).await?;
    if let Some(version) = conn.dirty_version(MIGRATIONS_TABLE).await?
        && migrator.version_exists(version)
    {
        tracing::warn!(version, "running again a migration that was cut in half");
        sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM {MIGRATIONS_TABLE} WHERE version = ? AND NOT success"
        )))
        .bind(version)
        .execute(&mut *conn)
        .await?;
    }
    // Back to the pool, still holding the lock: the migrator takes it from there.
    drop(conn);
    migrator.set_locking(false);
    let migrated = migrator.run(pool).await;
    sqlx::raw_sql(AssertSqlSafe(format!("DO RELEASE_LOCK({LOCK})")))
        .execute(pool)
        .await?;
    migrated?;
    Ok(())
}
