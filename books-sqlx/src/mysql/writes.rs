//! The MariaDB store's writes that need a transaction of their own: creates written
//! together (one statement for a batch), keyed creates, and conditional writes
//! with the book's row locked. A deadlock rolls a transaction back whole; each is sent
//! once more before it counts as unavailable.

use books_core::store::{
    BookInput, BookRecord, Conditional, ConditionalWrites, KeyedCreate, Precondition, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::mysql::{MySql, MySqlRow};

use super::{MySqlStore, retry_deadlock};
use crate::batch::{self, CreateWriter, Created, NewBook};
use crate::error::OrStoreError;
use crate::queries::{self, book_args};
use crate::rows::StoreRow;
use crate::statement::{Arg, Statement};
use crate::transactions::{insert_in, keep_key, write_if};

impl CreateWriter for MySqlStore {
    /// Two batches under way: one commits (its log flushed) while the next is written,
    /// each on a connection of its own and so in slots of its own (no lock between them).
    const WRITERS: usize = 2;
    async fn create_one(&self, new: &NewBook) -> Created {
        if new.key.is_none() {
            return queries::create(self, new).await;
        }
        let created = retry_deadlock(|| async {
            let mut tx = self.pool.begin().await?;
            let created = insert_in::<MySql>(&mut tx, &self.sql, true, new).await?;
            match created {
                Ok(KeyedCreate::Created(_)) => tx.commit().await?,
                _ => tx.rollback().await?,
            }
            Ok(created)
        });
        created.await.or_store_error()?
    }

    /// One statement (the books as a JSON array, `JSON_TABLE`) in a transaction,
    /// committed once every row is attributed to its book ([`batch::attribute`]) and
    /// every key's record is kept (a key found taken sends the batch back, to be written
    /// one create at a time): one round trip for the books, where one insert each would
    /// take a round trip each on the one writing task.
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        let json = serde_json::Value::Array(
            books
                .iter()
                .map(|new| {
                    serde_json::json!({
                        "t": new.book.title,
                        "a": new.book.author_id,
                        "y": new.book.year,
                        "c": new.now.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
                    })
                })
                .collect(),
        )
        .to_string();
        retry_deadlock(|| async {
            let mut tx = self.pool.begin().await?;
            let rows = self
                .sql
                .create_many
                .query(&[Arg::Text(&json)])
                .fetch_all(&mut *tx)
                .await?;
            let written = rows
                .iter()
                .map(|row| row.book().map(Into::into))
                .collect::<Result<_, _>>()?;
            let Some(created) = batch::attribute(books, written) else {
                tx.rollback().await?;
                return Ok(None);
            };
            for (new, created) in books.iter().zip(&created) {
                let Ok(KeyedCreate::Created(book)) = created else {
                    continue;
                };
                if !keep_key::<MySql>(&mut tx, &self.sql, true, book, new).await? {
                    tx.rollback().await?;
                    return Ok(None);
                }
            }
            tx.commit().await?;
            Ok(Some(created))
        })
        .await
    }
}

impl MySqlStore {
    /// `write` (and `then`, MariaDB's read after an update) on the book `id` if
    /// `precondition` holds for it, in one transaction that holds its row (and its
    /// author's) from the check to the commit.
    async fn guarded(
        &self,
        id: i64,
        precondition: Precondition<'_>,
        write: (&Statement, Option<&Statement>),
        args: &[Arg<'_>],
    ) -> Result<Conditional<Option<Vec<MySqlRow>>>, sqlx::Error> {
        retry_deadlock(|| async {
            let mut tx = self.pool.begin().await?;
            let written =
                write_if::<MySql>(&mut tx, &self.sql, true, id, precondition, write, args).await?;
            if matches!(written, Conditional::Done(Some(_))) {
                tx.commit().await?;
            }
            Ok(written)
        })
        .await
    }
}

#[async_trait::async_trait]
impl ConditionalWrites for MySqlStore {
    /// Checked and written with the book's row (and its author's) locked.
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        let [title, author, year, now] = book_args(book, now);
        let args = [title, author, year, now, Arg::Int(id)];
        let write = (&self.sql.update, self.sql.updated.as_ref());
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

    /// Checked and deleted with the book's row (and its author's) locked.
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let args = [Arg::Int(id)];
        let written = self
            .guarded(id, precondition, (&self.sql.delete, None), &args)
            .await;
        Ok(match written.or_store_error()? {
            Conditional::Done(rows) => Conditional::Done(rows.is_some_and(|rows| !rows.is_empty())),
            Conditional::Refused(current) => Conditional::Refused(current),
        })
    }
}
