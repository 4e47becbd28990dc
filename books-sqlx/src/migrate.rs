//! Embedded migrations that live beside a host's own: our bookkeeping has a table of its
//! own, so a host's sqlx migrator and ours never see each other's versions.

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};

/// Where the store records the migrations it applied (sqlx's default is
/// `_sqlx_migrations`, which stays the host's).
pub const MIGRATIONS_TABLE: &str = "_books_migrations";

/// sqlx's default table, where versions before 0.2 of this crate recorded ours.
const LEGACY_TABLE: &str = "_sqlx_migrations";

/// The migration files of one database, as `(file name, SQL)`, embedded at compile time.
macro_rules! embedded {
    ($dir:literal: $($file:literal),+ $(,)?) => {
        &[$(($file, include_str!(concat!("../migrations/", $dir, "/", $file)))),+]
    };
}

#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: &[(&str, &str)] = embedded!("postgres":
    "0001_books.sql",
    "0002_book_count.sql",
    "0003_counter_search_path.sql",
    "0004_version.sql",
    "0005_book_ranges.sql",
    "0006_spread_counters.sql",
    "0007_push.sql",
    "0008_fold_entered_ranges.sql",
    "0009_truncate.sql",
    "0010_idempotency_keys.sql",
    "0011_changes.sql",
);

#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &[(&str, &str)] = embedded!("sqlite":
    "0001_books.sql",
    "0002_book_count.sql",
    "0003_version.sql",
    "0004_book_ranges.sql",
    "0005_book_groups.sql",
    "0006_idempotency_keys.sql",
    "0007_changes.sql",
);

/// A migrator of `files` (`<version>_<description>.sql`, as sqlx's `migrate!` reads a
/// folder: the same versions, descriptions and checksums) recording into
/// [`MIGRATIONS_TABLE`]. Built from embedded text rather than by `migrate!`, which
/// needs sqlx's `macros` feature and with it the drivers built a second time for the
/// compiler (BENCHMARKS.md, "First build").
pub(crate) fn ours(files: &[(&'static str, &'static str)]) -> Migrator {
    let migrations = files
        .iter()
        .map(|&(file, sql)| {
            let (version, description) = file
                .trim_end_matches(".sql")
                .split_once('_')
                .expect("<version>_<description>.sql");
            Migration::new(
                version.parse().expect("a numeric version"),
                description.replace('_', " ").into(),
                MigrationType::Simple,
                AssertSqlSafe(sql).into_sql_str(),
                sql.starts_with("-- no-transaction"),
            )
        })
        .collect();
    let mut migrator = Migrator::with_migrations(migrations);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in `migrations/` is embedded, in order, and nothing else.
    #[test]
    fn every_migration_file_is_embedded() {
        let lists: [(&str, &[(&str, &str)]); 2] = [("postgres", POSTGRES), ("sqlite", SQLITE)];
        for (dir, embedded) in lists {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(dir);
            let mut files: Vec<String> = std::fs::read_dir(&path)
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            let names: Vec<&str> = embedded.iter().map(|(file, _)| *file).collect();
            assert_eq!(names, files, "{dir}");
            let migrator = ours(embedded);
            let versions: Vec<i64> = migrator.iter().map(|m| m.version).collect();
            let expected: Vec<i64> = (1..=files.len() as i64).collect();
            assert_eq!(versions, expected, "{dir}");
        }
    }

    /// Versions, descriptions and checksums are what sqlx reads from the folder (as its
    /// `migrate!` did): a database migrated before sees no change.
    #[tokio::test]
    async fn migrations_are_what_sqlx_reads_from_the_folder() {
        let lists: [(&str, &[(&str, &str)]); 2] = [("postgres", POSTGRES), ("sqlite", SQLITE)];
        for (dir, embedded) in lists {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(dir);
            let read = Migrator::new(path.as_path()).await.unwrap();
            let ours = ours(embedded);
            let fields = |m: &Migration| {
                (
                    m.version,
                    m.description.to_string(),
                    m.checksum.to_vec(),
                    m.no_tx,
                )
            };
            let read: Vec<_> = read.iter().map(fields).collect();
            let ours: Vec<_> = ours.iter().map(fields).collect();
            assert_eq!(ours, read, "{dir}");
        }
    }
}
