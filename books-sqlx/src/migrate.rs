//! Embedded migrations that live beside a host's own: our bookkeeping has a table of its
//! own, so a host's sqlx migrator and ours never see each other's versions.

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};

/// Where the store records the migrations it applied (sqlx's default is
/// `_sqlx_migrations`, which stays the host's).
pub const MIGRATIONS_TABLE: &str = "_books_migrations";

/// The migration files of one database, as `(file name, SQL)`, embedded at compile time.
macro_rules! embedded {
    ($dir:literal: $($file:literal),+ $(,)?) => {
        &[$(($file, include_str!(concat!("../migrations/", $dir, "/", $file)))),+]
    };
}

#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: &[(&str, &str)] =
    embedded!("postgres": "0001_books.sql", "0002_free_slots.sql", "0003_title_lower.sql");

#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &[(&str, &str)] = embedded!("sqlite": "0001_books.sql");

#[cfg(feature = "mysql")]
pub(crate) const MYSQL: &[(&str, &str)] = embedded!("mysql": "0001_books.sql");

/// A migrator of `files` (`<version>_<description>.sql`, as sqlx's `migrate!` reads a
/// folder: the same versions, descriptions and checksums) recording into
/// [`MIGRATIONS_TABLE`]. Built from embedded text rather than by `migrate!`, which
/// needs sqlx's `macros` feature and with it the drivers built a second time for the
/// compiler (`cargo build --release --timings`).
pub(crate) fn migrator_of(files: &[(&'static str, &'static str)]) -> Migrator {
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

#[cfg(feature = "postgres")]
pub(crate) mod postgres {
    use std::time::Instant;

    use sqlx::PgPool;
    use sqlx::migrate::{MigrateError, Migrator};

    use super::*;

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

/// MariaDB: migrations under sqlx's `GET_LOCK`, finishing one cut in half.
#[cfg(feature = "mysql")]
pub(crate) mod mysql {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each database's folder and what is embedded from it.
    fn lists() -> [(&'static str, &'static [(&'static str, &'static str)]); 3] {
        [("postgres", POSTGRES), ("sqlite", SQLITE), ("mysql", MYSQL)]
    }

    /// Every file in `migrations/` is embedded, in order, and nothing else.
    #[test]
    fn every_migration_file_is_embedded() {
        for (dir, embedded) in lists() {
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
            let migrator = migrator_of(embedded);
            let versions: Vec<i64> = migrator.iter().map(|m| m.version).collect();
            let expected: Vec<i64> = (1..=files.len() as i64).collect();
            assert_eq!(versions, expected, "{dir}");
        }
    }

    /// Versions, descriptions and checksums are what sqlx reads from the folder (as its
    /// `migrate!` did): a database migrated before sees no change.
    #[tokio::test]
    async fn migrations_are_what_sqlx_reads_from_the_folder() {
        for (dir, embedded) in lists() {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(dir);
            let read = Migrator::new(path.as_path()).await.unwrap();
            let ours = migrator_of(embedded);
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
