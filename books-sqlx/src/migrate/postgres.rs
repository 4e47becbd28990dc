//! PostgreSQL: each migration in a transaction of its own, or online (its steps one at a
//! time, outside any transaction) where it has an online form, under sqlx's migration
//! lock; through a transaction pooler, everything in one transaction.

use std::time::{Duration, Instant};

use sqlx::migrate::{Migrate, MigrateError, Migration, Migrator};
use sqlx::{PgConnection, PgPool, Row};

use super::*;

/// The migrations the store runs online, by version: the same schema as the migration
/// of that version, built without stopping writes (`migrations/postgres-online/`).
const ONLINE: &[(i64, &str)] = &[(
    3,
    include_str!("../../migrations/postgres-online/0003_title_lower.sql"),
)];

/// How often a process asks again for the migration lock another holds.
const LOCK_POLL: Duration = Duration::from_millis(250);

/// How many times an online migration is run again after PostgreSQL broke a deadlock by
/// failing one of its steps (see [`run`]).
const ONLINE_TRIES: u32 = 5;

/// Applies `migrator` on `conn` (its `search_path` the store's schema, if any), under
/// the lock sqlx's migrator takes (so an earlier release's process that starts
/// meanwhile finds the work done): each pending migration in a transaction of its own,
/// or online where it has an online form ([`ONLINE`]). A version recorded that this
/// release does not know (a later release's) is left alone.
///
/// The lock is asked for again and again (`pg_try_advisory_lock`), never waited for in
/// a statement: `CREATE INDEX CONCURRENTLY` waits for every transaction of the database
/// to end, a statement waiting for the lock its own process holds among them (a
/// deadlock). An earlier release's process that starts meanwhile does wait in a
/// statement (sqlx's `pg_advisory_lock`); PostgreSQL then fails one of the two, and an
/// online migration whose step it failed runs again.
pub(crate) async fn run(
    conn: &mut PgConnection,
    migrator: &Migrator,
    schema: Option<&str>,
) -> Result<(), crate::Error> {
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut *conn)
        .await?;
    let key = sqlx_lock_key(&database);
    let (asked, mut told) = (Instant::now(), false);
    while !sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
        .bind(key)
        .fetch_one(&mut *conn)
        .await?
    {
        if !told && asked.elapsed() > Duration::from_secs(10) {
            tracing::info!("waiting for another process's migrations to end");
            told = true;
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
    let migrated = apply_pending(conn, migrator, schema).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .execute(&mut *conn)
        .await;
    migrated?;
    unlocked?;
    Ok(())
}

/// The key of the advisory lock sqlx's PostgreSQL migrator takes for `database`
/// (`sqlx-postgres`' `generate_lock_id`; a test holds sqlx's lock and finds this key
/// taken).
pub(crate) fn sqlx_lock_key(database: &str) -> i64 {
    const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    0x3d32_ad9e * i64::from(CRC.checksum(database.as_bytes()))
}

async fn apply_pending(
    conn: &mut PgConnection,
    migrator: &Migrator,
    schema: Option<&str>,
) -> Result<(), crate::Error> {
    if let Some(schema) = schema {
        conn.create_schema_if_not_exists(schema).await?;
    }
    conn.ensure_migrations_table(MIGRATIONS_TABLE).await?;
    if let Some(version) = conn.dirty_version(MIGRATIONS_TABLE).await? {
        return Err(MigrateError::Dirty(version).into());
    }
    let applied = conn.list_applied_migrations(MIGRATIONS_TABLE).await?;
    for migration in migrator.iter() {
        match applied.iter().find(|a| a.version == migration.version) {
            Some(a) if a.checksum != migration.checksum => {
                return Err(MigrateError::VersionMismatch(migration.version).into());
            }
            Some(_) => {}
            None => match ONLINE.iter().find(|(v, _)| *v == migration.version) {
                Some((_, steps)) if has_books(conn).await? => {
                    apply_online_retried(conn, migration, steps).await?;
                }
                _ => drop(conn.apply(MIGRATIONS_TABLE, migration).await?),
            },
        }
    }
    Ok(())
}

/// Whether `books` has a row: an online form is for a table writers use; an empty one
/// (a new database) takes the migration in a transaction, at once.
async fn has_books(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM books)")
        .fetch_one(conn)
        .await
}

/// [`apply_online`], run again (every step may be) after a step PostgreSQL failed to
/// break a deadlock (40P01).
async fn apply_online_retried(
    conn: &mut PgConnection,
    migration: &Migration,
    steps: &str,
) -> Result<(), crate::Error> {
    let mut tries = 1;
    loop {
        match apply_online(conn, migration, steps).await {
            Err(crate::Error::Migrate(MigrateError::ExecuteMigration(error, _)))
                if tries < ONLINE_TRIES
                    && matches!(&error, sqlx::Error::Database(db) if db.code().as_deref() == Some("40P01")) =>
            {
                tracing::warn!(version = migration.version, %error, "an online migration's step was failed to break a deadlock; running it again");
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Runs `steps` (a migration's online form) one at a time, then records `migration` as
/// applied. Steps are separated by lines starting `-- step`; a step whose marker says
/// `each statement this query returns` is a query whose rows are the statements to run.
async fn apply_online(
    conn: &mut PgConnection,
    migration: &Migration,
    steps: &str,
) -> Result<(), crate::Error> {
    let started = Instant::now();
    let failed = |e| MigrateError::ExecuteMigration(e, migration.version);
    for (marker, step) in online_steps(steps) {
        if marker.contains("each statement this query returns") {
            let rows = sqlx::raw_sql(AssertSqlSafe(step))
                .fetch_all(&mut *conn)
                .await;
            for row in rows.map_err(failed)? {
                let statement: String = row.try_get(0)?;
                sqlx::raw_sql(AssertSqlSafe(statement))
                    .execute(&mut *conn)
                    .await
                    .map_err(failed)?;
            }
        } else {
            sqlx::raw_sql(AssertSqlSafe(step))
                .execute(&mut *conn)
                .await
                .map_err(failed)?;
        }
    }
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {MIGRATIONS_TABLE} (version, description, success, checksum, execution_time) \
         VALUES ($1, $2, TRUE, $3, $4)"
    )))
    .bind(migration.version)
    .bind(&*migration.description)
    .bind(&*migration.checksum)
    .bind(i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// An online form's steps: each one's marker line and its SQL (a single statement).
fn online_steps(text: &str) -> Vec<(&str, String)> {
    let mut steps: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("-- step") {
            steps.push((line, String::new()));
        } else if let Some((_, sql)) = steps.last_mut()
            && !line.starts_with("--")
        {
            sql.push_str(line);
            sql.push('\n');
        }
    }
    steps
}

/// Our advisory lock's key while migrating through a pooler: "booksmig".
const LOCK: i64 = 0x626f_6f6b_736d_6967;

/// Applies `migrator` through a transaction-mode pooler: everything in one
/// transaction (so the lock is a transaction-level one, and a failure leaves
/// nothing half-done), every statement unnamed or simple-protocol. The bookkeeping
/// is sqlx's, in [`MIGRATIONS_TABLE`], so the two ways of migrating agree on what
/// was applied; checks as sqlx's migrator makes them (a failed migration, a changed
/// version) fail the same way. Every migration runs as written, in the transaction: an
/// online form cannot (`CREATE INDEX CONCURRENTLY` runs outside any), so a migration
/// that builds an index holds writes while it builds.
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
        // A version this release does not know (a later release's) is left alone.
        if let Some(m) = migrator.iter().find(|m| m.version == *version)
            && *m.checksum != checksum[..]
        {
            return Err(MigrateError::VersionMismatch(*version).into());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `migrations/postgres-online/` is an online form in [`ONLINE`], of a
    /// migration of the same file name, and each of its steps is one statement.
    #[test]
    fn online_forms_are_embedded_and_split_into_single_statements() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir.join("postgres-online"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files.len(), ONLINE.len());
        for (file, (version, text)) in files.iter().zip(ONLINE) {
            let plain = POSTGRES.iter().find(|(name, _)| name == file);
            assert!(plain.is_some(), "{file} is a migration's online form");
            assert!(file.starts_with(&format!("{version:04}_")), "{file}");
            let on_disk = std::fs::read_to_string(dir.join("postgres-online").join(file));
            assert_eq!(on_disk.unwrap(), *text);
            let steps = online_steps(text);
            assert!(!steps.is_empty());
            for (marker, sql) in steps {
                let statement = sql.trim().trim_end_matches(';');
                assert!(!statement.is_empty(), "{marker}");
                assert!(!statement.contains(';'), "one statement: {statement}");
            }
        }
    }
}
