//! The conditional-writes tier (`If-Match` on `PUT` and `DELETE`): the check and the
//! write in one transaction, the book held from the check on ([`BookTables::locked`]:
//! SQLite's write lock from the transaction's start; on PostgreSQL and MariaDB the
//! book's row and its writer's), so no other write comes between them.
//!
//! [`BookTables::locked`]: books_sqlx::BookTables::locked

use async_trait::async_trait;
use books_core::store::{
    BookInput, BookRecord, Conditional, ConditionalWrites, Precondition, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::{Sqlite, Transaction};

use crate::CatalogueStore;
use crate::catalogue::{TABLES, delete, failed, update};

impl CatalogueStore {
    /// A write transaction holding the book `id` if `precondition` holds for it; else
    /// the answer: no such book, or refused.
    async fn checked<T>(
        &self,
        id: i64,
        precondition: Precondition<'_>,
        none: T,
    ) -> Result<Result<Transaction<'static, Sqlite>, Conditional<T>>, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(failed)?;
        Ok(match TABLES.locked(&mut tx, id).await? {
            None => Err(Conditional::Done(none)),
            Some(current) if !precondition(&current) => Err(Conditional::Refused(current)),
            Some(_) => Ok(tx),
        })
    }
}

#[async_trait]
impl ConditionalWrites for CatalogueStore {
    async fn update_if(
        &self,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        let mut tx = match self.checked(id, precondition, None).await? {
            Ok(tx) => tx,
            Err(answer) => return Ok(answer),
        };
        let written = update(&mut tx, id, new, now).await?;
        tx.commit().await.map_err(failed)?;
        Ok(Conditional::Done(written))
    }

    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let mut tx = match self.checked(id, precondition, false).await? {
            Ok(tx) => tx,
            Err(answer) => return Ok(answer),
        };
        let deleted = delete(&mut tx, id).await?;
        tx.commit().await.map_err(failed)?;
        Ok(Conditional::Done(deleted))
    }
}
