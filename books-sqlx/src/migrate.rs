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
pub(crate) const POSTGRES: &[(&str, &str)] = embedded!("postgres":
    "0001_books.sql",
    "0002_free_slots.sql",
    "0003_title_lower.sql",
    "0004_batch_ranges.sql",
    "0005_fold_unlocked.sql",
);

#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &[(&str, &str)] = embedded!("sqlite": "0001_books.sql");

#[cfg(feature = "mysql")]
pub(crate) const MYSQL: &[(&str, &str)] =
    embedded!("mysql": "0001_books.sql", "0002_batch_counts.sql", "0003_batch_ranges.sql");

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
    // A database migrated further by a later release (a rollout under way) still starts
    // an earlier release's process: every migration keeps the schema before it working.
    migrator.set_ignore_missing(true);
    migrator
}

#[cfg(feature = "postgres")]
pub(crate) mod postgres;

/// MariaDB: migrations under sqlx's `GET_LOCK`, finishing one cut in half.
#[cfg(feature = "mysql")]
pub(crate) mod mysql;

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
