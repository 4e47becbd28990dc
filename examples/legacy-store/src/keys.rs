//! What it takes to add the idempotent-creates tier (`Idempotency-Key` on creates): a
//! table of records beside the host's (books-sqlx's [`KeyRecords`] creates and writes
//! it), and a create that writes the book and its key's record in one transaction.

use std::sync::LazyLock;

use async_trait::async_trait;
use books_core::store::{
    BookInput, IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate, StoreError,
};
use books_sqlx::KeyRecords;
use chrono::{DateTime, Utc};
use sqlx::Sqlite;

use crate::CatalogueStore;
use crate::catalogue::{TABLES, failed, insert};

/// The records, in `catalogue_keys`. The host installs it once beside its tables
/// (`KEYS.install(&pool).await?`; safe to repeat).
pub static KEYS: LazyLock<KeyRecords<Sqlite>> =
    LazyLock::new(|| KeyRecords::new("catalogue_keys").expect("a table name"));

#[async_trait]
impl IdempotentCreates for CatalogueStore {
    /// The book and its key's record commit together, or neither does.
    async fn create_keyed(
        &self,
        new: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(failed)?;
        let id = insert(&mut tx, new, now).await.map_err(failed)?;
        let id = id.ok_or(StoreError::AuthorNotFound(new.author_id))?;
        let written = TABLES.book(&mut tx, id).await?;
        let written = written.ok_or_else(|| StoreError::other("the created book vanished"))?;
        if !KEYS.keep(&mut tx, key, &written, now).await? {
            return Ok(KeyedCreate::Taken); // dropping `tx` rolls the book back
        }
        tx.commit().await.map_err(failed)?;
        Ok(KeyedCreate::Created(written))
    }

    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(KEYS.record(&mut conn, key, now).await?)
    }

    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(KEYS.forget_expired(&mut conn, now, limit).await?)
    }
}
