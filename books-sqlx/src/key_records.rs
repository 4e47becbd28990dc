//! Idempotency keys' records over a host's table ([`KeyRecords`]): the table, keeping a
//! record in a create's own transaction, replaying it, forgetting expired ones, through
//! the statements this crate's stores keep theirs with ([`crate::key_sql`]).

use std::marker::PhantomData;

use books_core::store::{BookRecord, IdempotencyKey, IdempotencyRecord};
use chrono::{DateTime, Utc};

use crate::Error;
use crate::backend::Backend;
use crate::key_sql::{KeyStatements, keep};
use crate::rows::StoreRow;
use crate::statement::{Arg, Dialect};
use crate::version_triggers::{last, name};

/// The idempotent-creates tier's records over a table of a host's own
/// ([`IdempotentCreates`](books_core::store::IdempotentCreates)): the host writes the
/// book in a transaction of its own and calls [`keep`](Self::keep) in it; replays,
/// expiry and the race of two requests with one key are this part's, as in this crate's
/// stores (the conformance suite's `idempotent_creates` tier checks them). On MariaDB,
/// two requests that race to replace one *expired* record can deadlock (1213): run the
/// create's transaction in [`retry_conflicts`](crate::retry_conflicts), as below and as
/// the MariaDB store does.
///
/// ```no_run
/// # #[cfg(feature = "mysql")]
/// # async fn run(pool: books_sqlx::sqlx::MySqlPool, key: books_core::store::IdempotencyKey,
/// #     now: chrono::DateTime<chrono::Utc>, book: books_core::store::BookRecord)
/// #     -> Result<(), books_sqlx::Error> {
/// use books_core::store::KeyedCreate;
/// use books_sqlx::KeyRecords;
/// use books_sqlx::sqlx::MySql;
/// let keys = KeyRecords::<MySql>::new("catalog.api_keys")?;
/// keys.install(&pool).await?; // once, beside the host's migrations
/// // IdempotentCreates::create_keyed:
/// let created = books_sqlx::retry_conflicts(|| async {
///     let mut tx = pool.begin().await?;
///     // … the host's INSERT of `book` on `tx` …
///     if !keys.keep(&mut tx, &key, &book, now).await? {
///         return Ok(KeyedCreate::Taken); // dropping `tx` rolls the book back
///     }
///     tx.commit().await?;
///     Ok::<_, books_sqlx::Error>(KeyedCreate::Created(book.clone()))
/// })
/// .await?;
/// # let _ = created; Ok(()) }
/// ```
#[derive(Debug)]
pub struct KeyRecords<DB: Backend> {
    database: PhantomData<fn() -> DB>,
    table: String,
    sql: KeyStatements,
}

impl<DB: Backend> Clone for KeyRecords<DB> {
    fn clone(&self) -> Self {
        Self {
            database: PhantomData,
            table: self.table.clone(),
            sql: self.sql.clone(),
        }
    }
}

impl<DB: Backend> KeyRecords<DB> {
    /// Records in table `table` (created by [`install`](Self::install)): an identifier of
    /// `a-z`, `0-9` and `_`, optionally after a schema (PostgreSQL), a database (MariaDB)
    /// or an attached database (SQLite) and a dot.
    pub fn new(table: &str) -> Result<Self, Error> {
        let table = name(table)?;
        Ok(Self {
            database: PhantomData,
            sql: KeyStatements::new(DB::DIALECT, &table),
            table,
        })
    }

    /// The statements [`install`](Self::install) runs, for a host that migrates with
    /// tools of its own. Each may be run again.
    pub fn statements(&self) -> Vec<String> {
        let table = &self.table;
        let index = format!("{}_expiry", last(table));
        let columns = |key: &str, blob: &str, body: &str, time: &str| {
            format!(
                "{key} PRIMARY KEY, fingerprint {blob} NOT NULL, status INTEGER NOT NULL, \
                 content_type TEXT NOT NULL, location TEXT NOT NULL, etag TEXT NOT NULL, \
                 body {body} NOT NULL, expires_at {time} NOT NULL"
            )
        };
        match DB::DIALECT {
            Dialect::MySql => vec![format!(
                "CREATE TABLE IF NOT EXISTS {table} ({}, KEY {index} (expires_at)) \
                 ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin",
                columns(
                    "`key` VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL",
                    "BLOB",
                    "MEDIUMBLOB",
                    "DATETIME(6)"
                )
            )],
            Dialect::Postgres => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {table} ({})",
                    columns("key TEXT", "BYTEA", "BYTEA", "TIMESTAMPTZ")
                ),
                format!("CREATE INDEX IF NOT EXISTS {index} ON {table} (expires_at)"),
            ],
            // SQLite names an attached database on the index, not on its table.
            Dialect::Sqlite => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {table} ({})",
                    columns("key TEXT", "BLOB", "BLOB", "TEXT")
                ),
                format!(
                    "CREATE INDEX IF NOT EXISTS {}{index} ON {} (expires_at)",
                    table.strip_suffix(last(table)).unwrap_or_default(),
                    last(table)
                ),
            ],
        }
    }

    /// Creates the table, if not there yet, on one of `pool`'s connections.
    pub async fn install(&self, pool: &sqlx::Pool<DB>) -> Result<(), Error> {
        let mut conn = pool.acquire().await?;
        for statement in self.statements() {
            DB::text_rows(&mut conn, statement).await?;
        }
        Ok(())
    }

    /// In the transaction on `conn` that wrote `book` for a create keyed by `key`: keeps
    /// the key's record with the answer to `book` (`now`: a record that expired by then
    /// is replaced). `false`: an unexpired record for the key is there; roll the
    /// transaction back and answer [`KeyedCreate::Taken`](books_core::store::KeyedCreate).
    pub async fn keep(
        &self,
        conn: &mut DB::Connection,
        key: &IdempotencyKey,
        book: &BookRecord,
        now: DateTime<Utc>,
    ) -> Result<bool, Error> {
        Ok(keep::<DB>(conn, &self.sql, true, (key, book, now)).await?)
    }

    /// [`IdempotentCreates::idempotency_record`](books_core::store::IdempotentCreates::idempotency_record)
    /// on `conn` (the primary's: a replica may not have the record yet).
    pub async fn record(
        &self,
        conn: &mut DB::Connection,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, Error> {
        let args = [Arg::Text(key), Arg::Time(now)];
        let rows = DB::rows(conn, &self.sql.record, &args, true).await?;
        Ok(rows.first().map(StoreRow::key_record).transpose()?)
    }

    /// [`IdempotentCreates::forget_expired_keys`](books_core::store::IdempotentCreates::forget_expired_keys)
    /// on `conn`: forgets at most `limit` records expired at `now`; how many.
    pub async fn forget_expired(
        &self,
        conn: &mut DB::Connection,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, Error> {
        let args = [Arg::Time(now), Arg::Int(i64::from(limit))];
        let rows = DB::rows(conn, &self.sql.forget_expired, &args, true).await?;
        Ok(rows.len() as u64)
    }
}
