//! Embedded migrations that live beside a host's own: our bookkeeping has a table of its
//! own, so a host's sqlx migrator and ours never see each other's versions.

use sqlx::AssertSqlSafe;
use sqlx::migrate::Migrator;

/// Where the store records the migrations it applied (sqlx's default is
/// `_sqlx_migrations`, which stays the host's).
pub const MIGRATIONS_TABLE: &str = "_books_migrations";

/// sqlx's default table, where versions before 0.2 of this crate recorded ours.
const LEGACY_TABLE: &str = "_sqlx_migrations";

/// `migrator` recording into [`MIGRATIONS_TABLE`].
pub(crate) fn ours(mut migrator: Migrator) -> Migrator {
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator
}

/// Moves rows of ours that an older version of this crate wrote into sqlx's default
/// table (same version and checksum) over to [`MIGRATIONS_TABLE`], under the migration
/// lock, so that neither our migrator nor a host's finds the other's versions. Each step
/// can be repeated, so a crash half-way is mended by the next start.
///
/// One function per connection type: sqlx's executor traits, taken generically, make the
/// future fail to be `Send` ("implementation of `Executor` is not general enough").
macro_rules! adopt_legacy {
    ($connection:ty, $legacy_exists:literal) => {
        pub(crate) async fn adopt_legacy(
            conn: &mut $connection,
            migrator: &sqlx::migrate::Migrator,
        ) -> Result<(), $crate::Error> {
            use sqlx::migrate::Migrate;
            let legacy_exists: bool = sqlx::query_scalar($legacy_exists)
                .fetch_one(&mut *conn)
                .await?;
            if !legacy_exists {
                return Ok(());
            }
            conn.lock().await?;
            let legacy = conn.list_applied_migrations(LEGACY_TABLE).await?;
            let versions: Vec<String> = migrator
                .iter()
                .filter(|m| {
                    legacy
                        .iter()
                        .any(|a| a.version == m.version && a.checksum == m.checksum)
                })
                .map(|m| m.version.to_string())
                .collect();
            let adopted = if versions.is_empty() {
                Ok(())
            } else {
                adopt(conn, &versions.join(", ")).await
            };
            conn.unlock().await?;
            adopted
        }

        /// `versions` are integers of ours: nothing to inject.
        async fn adopt(conn: &mut $connection, versions: &str) -> Result<(), $crate::Error> {
            use sqlx::migrate::Migrate;
            conn.ensure_migrations_table(MIGRATIONS_TABLE).await?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {MIGRATIONS_TABLE} \
                 (version, description, installed_on, success, checksum, execution_time) \
                 SELECT version, description, installed_on, success, checksum, execution_time \
                 FROM {LEGACY_TABLE} WHERE version IN ({versions}) \
                 AND version NOT IN (SELECT version FROM {MIGRATIONS_TABLE})"
            )))
            .execute(&mut *conn)
            .await?;
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {LEGACY_TABLE} WHERE version IN ({versions})"
            )))
            .execute(&mut *conn)
            .await?;
            Ok(())
        }
    };
}

#[cfg(feature = "sqlite")]
pub(crate) mod sqlite {
    use super::*;
    adopt_legacy!(
        sqlx::SqliteConnection,
        "SELECT EXISTS (SELECT 1 FROM sqlite_master \
         WHERE type = 'table' AND name = '_sqlx_migrations')"
    );
}

#[cfg(feature = "postgres")]
pub(crate) mod postgres {
    use std::time::Instant;

    use sqlx::PgPool;
    use sqlx::migrate::{MigrateError, Migrator};

    use super::*;

    adopt_legacy!(
        sqlx::PgConnection,
        "SELECT to_regclass('_sqlx_migrations') IS NOT NULL"
    );

    /// Our advisory lock's key while migrating through a pooler: "booksmig".
    const LOCK: i64 = 0x626f_6f6b_736d_6967;

    /// Applies `migrator` through a transaction-mode pooler: everything in one
    /// transaction (so the lock is a transaction-level one, and a failure leaves
    /// nothing half-done), every statement unnamed or simple-protocol. The bookkeeping
    /// is sqlx's, in [`MIGRATIONS_TABLE`], so the two ways of migrating agree on what
    /// was applied; checks as sqlx's migrator makes them (a failed migration, a changed
    /// or unknown version) fail the same way.
    pub(crate) async fn in_one_transaction(
        pool: &PgPool,
        migrator: &Migrator,
        schema: Option<&str>,
    ) -> Result<(), crate::Error> {
        let mut tx = pool.begin().await?;
        // First the lock: concurrent `CREATE SCHEMA IF NOT EXISTS` may fail otherwise.
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SELECT pg_advisory_xact_lock({LOCK})"
        )))
        .execute(&mut *tx)
        .await?;
        if let Some(schema) = schema {
            // A checked identifier: nothing to inject.
            sqlx::raw_sql(AssertSqlSafe(format!(
                "CREATE SCHEMA IF NOT EXISTS {schema}; SET LOCAL search_path TO {schema}"
            )))
            .execute(&mut *tx)
            .await?;
        }
        sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ( \
                 version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
                 installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, \
                 checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL)"
        )))
        .execute(&mut *tx)
        .await?;
        let legacy: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .persistent(false)
            .fetch_one(&mut *tx)
            .await?;
        for migration in migrator.iter().filter(|_| legacy) {
            for sql in [
                format!(
                    "INSERT INTO {MIGRATIONS_TABLE} \
                     (version, description, installed_on, success, checksum, execution_time) \
                     SELECT version, description, installed_on, success, checksum, execution_time \
                     FROM {LEGACY_TABLE} WHERE version = $1 AND checksum = $2 \
                     AND version NOT IN (SELECT version FROM {MIGRATIONS_TABLE})"
                ),
                format!("DELETE FROM {LEGACY_TABLE} WHERE version = $1 AND checksum = $2"),
            ] {
                sqlx::query(AssertSqlSafe(sql))
                    .persistent(false)
                    .bind(migration.version)
                    .bind(&*migration.checksum)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let applied: Vec<(i64, Vec<u8>, bool)> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT version, checksum, success FROM {MIGRATIONS_TABLE} ORDER BY version"
        )))
        .persistent(false)
        .fetch_all(&mut *tx)
        .await?;
        for (version, checksum, success) in &applied {
            if !success {
                return Err(MigrateError::Dirty(*version).into());
            }
            match migrator.iter().find(|m| m.version == *version) {
                None => return Err(MigrateError::VersionMissing(*version).into()),
                Some(m) if *m.checksum != checksum[..] => {
                    return Err(MigrateError::VersionMismatch(*version).into());
                }
                Some(_) => {}
            }
        }
        let pending = migrator.iter().filter(|m| {
            m.migration_type.is_up_migration() && !applied.iter().any(|(v, ..)| *v == m.version)
        });
        for migration in pending {
            let started = Instant::now();
            sqlx::raw_sql(migration.sql.clone())
                .execute(&mut *tx)
                .await
                .map_err(|e| MigrateError::ExecuteMigration(e, migration.version))?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {MIGRATIONS_TABLE} \
                 (version, description, success, checksum, execution_time) \
                 VALUES ($1, $2, TRUE, $3, $4)"
            )))
            .persistent(false)
            .bind(migration.version)
            .bind(&*migration.description)
            .bind(&*migration.checksum)
            .bind(i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
