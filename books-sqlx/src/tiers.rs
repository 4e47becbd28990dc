//! Every tier of [`books_core::store`] for a [`SqlStore`], written once over its
//! [`Backend`]: the operations are [`queries`](crate::queries)' and
//! [`transactions`](crate::transactions)', creates go through the group commit
//! ([`batch`](crate::batch)).

use std::sync::Arc;

use async_trait::async_trait;
use books_core::store::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, BooksTally, Capabilities, Conditional,
    ConditionalWrites, IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate,
    ListQueries, ListQuery, Precondition, StoreError, Version, VersionTally, Versions,
};
use chrono::{DateTime, Utc};

use crate::backend::Backend;
use crate::backend::{ServerSet, SqlStore};
use crate::batch::NewBook;
use crate::error::OrStoreError;
use crate::queries::{self, book_args};
use crate::rows::StoreRow;
use crate::statement::{Arg, Statement};
use crate::transactions::write_if;

#[async_trait]
impl<DB: Backend> BookStore for SqlStore<DB> {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        Ok(queries::list(self, query).await?.0)
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        Ok(queries::get(self, id).await?.0)
    }

    /// Creates that arrive while another is written go together (group commit:
    /// docs/decisions.md, "Creates commit together").
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        let book = NewBook::new(book, now, None);
        queries::book_of(self.creates.create(self, book).await)
    }

    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        queries::update(self, id, book, now).await
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        queries::delete(self, id).await
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        queries::author_exists(self, id).await
    }

    /// Looks up author 0 through the store's own table and index (on the primary): a
    /// round trip that fails when the database or the migrated schema is missing; on
    /// PostgreSQL and MariaDB the primary is asked its role first (a server that no
    /// longer takes writes is [`Unready::WrongRole`](books_core::store::Unready)).
    async fn ready(&self) -> Result<(), StoreError> {
        DB::ready(self).await
    }

    fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
        Capabilities::of(self)
            .version_tally()
            .conditional_writes()
            .idempotent_creates()
            .list_queries()
    }
}

/// The version is kept by triggers in the writing transaction, whoever writes, and read
/// in the same statement as the data; its history is the database's (where the database
/// tells one: PostgreSQL's timeline and counter table's file, MariaDB's server and
/// counter table's creation), and it grows by random steps.
#[async_trait]
impl<DB: Backend> Versions for SqlStore<DB> {
    async fn version(&self) -> Result<Version, StoreError> {
        Ok(self.tallied(None).await?.version)
    }

    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        queries::list(self, query).await
    }

    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        queries::get(self, id).await
    }

    fn known_version(&self) -> Option<Version> {
        if self.servers.check_pool().is_closed() {
            // A closed store answers nothing, cached or not (503).
            return None;
        }
        DB::pushed_version(&self.extra).or_else(|| self.check.known())
    }
}

#[async_trait]
impl<DB: Backend> VersionTally for SqlStore<DB> {
    async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError> {
        let checked = self.tallied(Some(above)).await?;
        Ok((checked.version, checked.books))
    }
}

/// Filtered and sorted in one statement per page, the total in the same snapshot
/// ([`ListClauses`](crate::ListClauses)).
impl<DB: Backend> ListQueries for SqlStore<DB> {}

/// Checked and written in one transaction that holds the book's row (and its author's),
/// or on SQLite the database's write lock, from the check to the commit.
#[async_trait]
impl<DB: Backend> ConditionalWrites for SqlStore<DB> {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        let [title, author, year, now] = book_args(book, now);
        let args = [title, author, year, now, Arg::Int(id)];
        let write = (&self.sql.books.update, self.sql.books.updated.as_ref());
        let written = self.guarded(id, precondition, write, &args).await;
        Ok(match written.or_write_error(book.author_id)? {
            Conditional::Done(Some(rows)) => {
                let book = rows.first().map(|row| row.book().map(Into::into));
                Conditional::Done(book.transpose().or_store_error()?)
            }
            Conditional::Done(None) => Conditional::Done(None),
            Conditional::Refused(current) => Conditional::Refused(current),
        })
    }

    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let args = [Arg::Int(id)];
        let written = self
            .guarded(id, precondition, (&self.sql.books.delete, None), &args)
            .await;
        Ok(match written.or_store_error()? {
            Conditional::Done(rows) => Conditional::Done(rows.is_some_and(|rows| !rows.is_empty())),
            Conditional::Refused(current) => Conditional::Refused(current),
        })
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// `write` (and `then`, MariaDB's read after an update) on the book `id` if
    /// `precondition` holds for it, in one transaction that holds its row (and its
    /// author's) from the check to the commit.
    async fn guarded(
        &self,
        id: i64,
        precondition: Precondition<'_>,
        write: (&Statement, Option<&Statement>),
        args: &[Arg<'_>],
    ) -> Result<Conditional<Option<Vec<DB::Row>>>, sqlx::Error> {
        let persistent = self.persistent();
        DB::retried(self, || async {
            let mut tx = DB::begin(self).await?;
            let written = write_if::<DB>(
                &mut tx,
                &self.sql,
                persistent,
                id,
                precondition,
                write,
                args,
            )
            .await?;
            if matches!(written, Conditional::Done(Some(_))) {
                tx.commit().await?;
            }
            Ok(written)
        })
        .await
    }
}

/// A key's record is written in the book's own transaction.
#[async_trait]
impl<DB: Backend> IdempotentCreates for SqlStore<DB> {
    /// Written together with other creates, each with its key's record.
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        let book = NewBook::new(book, now, Some(key.clone()));
        self.creates.create(self, book).await
    }

    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        queries::key_record(self, key, now).await
    }

    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        queries::forget_keys(self, now, limit).await
    }
}

/// Authors, for hosts, demo data and tests (the API never writes them).
#[async_trait]
impl<DB: Backend> AuthorStore for SqlStore<DB> {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        queries::add_author(self, name).await
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        queries::remove_author(self, id).await
    }
}
