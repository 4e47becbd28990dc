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
    use super::*;
    adopt_legacy!(
        sqlx::PgConnection,
        "SELECT to_regclass('_sqlx_migrations') IS NOT NULL"
    );
}
