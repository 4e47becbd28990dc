//! The tiers of a [`HostStore`] beside its data tier: versions and their tally read in
//! the data's snapshot, conditional writes that hold the book from the check to the
//! commit, idempotent creates that commit the book with its key's record.

use async_trait::async_trait;
use books_core::store::{
    BookInput, BookPage, BookRecord, BooksTally, Conditional, ConditionalWrites, IdempotencyKey,
    IdempotencyRecord, IdempotentCreates, KeyedCreate, ListQuery, Precondition, StoreError,
    Version, VersionTally, Versions,
};
use chrono::{DateTime, Utc};

use crate::Error;
use crate::backend::Backend;
use crate::book_tables::snapshot;
use crate::host_store::{End, HostStore, HostWrites, failed, in_write};

/// Each read is one snapshot, so the version and the data agree (rule 4).
#[async_trait]
impl<DB: Backend, W: HostWrites<DB>> Versions for HostStore<DB, W> {
    async fn version(&self) -> Result<Version, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(self.parts.version.version(&mut conn).await?)
    }

    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        let mut tx = snapshot(&self.pool).await?;
        let at = self.parts.version.version(&mut tx).await?;
        Ok((self.parts.tables.page(&mut tx, query).await?, at.count))
    }

    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        let mut tx = snapshot(&self.pool).await?;
        let at = self.parts.version.version(&mut tx).await?;
        Ok((self.parts.tables.book(&mut tx, id).await?, at.count))
    }
}

/// Declared only when the version's counters keep the tally.
#[async_trait]
impl<DB: Backend, W: HostWrites<DB>> VersionTally for HostStore<DB, W> {
    async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(self.parts.version.tallied_version(&mut conn, above).await?)
    }
}

impl<DB: Backend, W: HostWrites<DB>> HostStore<DB, W> {
    /// Whether `precondition` holds for the book `id`, locked on `tx` until it ends:
    /// `Ok` to write, else the answer (no such book: `none`; refused).
    async fn holds<T>(
        &self,
        tx: &mut DB::Connection,
        id: i64,
        precondition: Precondition<'_>,
        none: T,
    ) -> Result<Result<(), Conditional<T>>, Error> {
        Ok(match self.parts.tables.locked(tx, id).await? {
            None => Err(Conditional::Done(none)),
            Some(current) if !precondition(&current) => Err(Conditional::Refused(current)),
            Some(_) => Ok(()),
        })
    }
}

#[async_trait]
impl<DB: Backend, W: HostWrites<DB>> ConditionalWrites for HostStore<DB, W> {
    async fn update_if(
        &self,
        id: i64,
        new: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        in_write!(
            self,
            |tx| match self.holds(tx, id, precondition, None).await? {
                Err(answer) => End::Commit(answer),
                Ok(()) => self
                    .updated(tx, id, new, now)
                    .await?
                    .map(Conditional::Done)
                    .into(),
            }
        )
    }

    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        in_write!(self, |tx| End::Commit(
            match self.holds(tx, id, precondition, false).await? {
                Err(answer) => answer,
                Ok(()) => Conditional::Done(self.parts.writes.delete(tx, id).await?),
            }
        ))
    }
}

#[async_trait]
impl<DB: Backend, W: HostWrites<DB>> IdempotentCreates for HostStore<DB, W> {
    /// The book and its key's record commit together, or neither does.
    async fn create_keyed(
        &self,
        new: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        in_write!(self, |tx| match self.inserted(tx, new, now).await? {
            Err(refused) => End::RollBack(Err(refused)),
            Ok(written) => match self.parts.keys.keep(tx, key, &written, now).await? {
                true => End::Commit(KeyedCreate::Created(written)),
                false => End::RollBack(Ok(KeyedCreate::Taken)), // the book goes too
            },
        })
    }

    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(self.parts.keys.record(&mut conn, key, now).await?)
    }

    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(self
            .parts
            .keys
            .forget_expired(&mut conn, now, limit)
            .await?)
    }
}
