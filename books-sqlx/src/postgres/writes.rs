//! The PostgreSQL store's writes that need a transaction of their own: creates written
//! together (one statement for a batch), keyed creates, and conditional writes with the
//! book's row locked.

use books_core::store::{
    BookInput, BookRecord, Conditional, ConditionalWrites, KeyedCreate, Precondition, StoreError,
};
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgRow, Postgres};

use super::PostgresStore;
use crate::batch::{self, CreateWriter, Created, NewBook};
use crate::error::OrStoreError;
use crate::queries::{self, book_args};
use crate::rows::StoreRow;
use crate::statement::{Arg, Statement};
use crate::transactions::{insert_in, keep_key, write_if};

impl CreateWriter for PostgresStore {
    async fn create_one(&self, new: &NewBook) -> Created {
        if new.key.is_none() {
            return queries::create(self, new).await;
        }
        let persistent = self.session.persistent();
        let created = self.session.bounded(async {
            let mut tx = self.session.begin(&self.pool).await?;
            let created = insert_in::<Postgres>(&mut tx, &self.sql, persistent, new).await?;
            match created {
                Ok(KeyedCreate::Created(_)) => tx.commit().await?,
                _ => tx.rollback().await?,
            }
            Ok(created)
        });
        created.await.or_store_error()?
    }

    /// One statement in a transaction, committed once every row is attributed to its
    /// book ([`batch::attribute`]) and every key's record is kept (a key found taken
    /// sends the batch back, to be written one create at a time).
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        let (mut titles, mut authors, mut years, mut times) = (vec![], vec![], vec![], vec![]);
        for new in books {
            titles.push(new.book.title.as_str());
            authors.push(new.book.author_id);
            years.push(new.book.year);
            times.push(new.now);
        }
        let persistent = self.session.persistent();
        self.session
            .bounded(async {
                let mut tx = self.session.begin(&self.pool).await?;
                let rows = sqlx::query(self.sql.create_many.text.clone())
                    .persistent(persistent)
                    .bind(titles)
                    .bind(authors)
                    .bind(years)
                    .bind(times)
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
                    if !keep_key::<Postgres>(&mut tx, &self.sql, persistent, book, new).await? {
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

impl PostgresStore {
    /// `write` on the book `id` if `precondition` holds for it, in one transaction that
    /// holds its row (and its author's) from the check to the commit.
    async fn guarded(
        &self,
        id: i64,
        precondition: Precondition<'_>,
        write: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Conditional<Option<Vec<PgRow>>>, sqlx::Error> {
        let persistent = self.session.persistent();
        self.session
            .bounded(async {
                let mut tx = self.session.begin(&self.pool).await?;
                let written = write_if::<Postgres>(
                    &mut tx,
                    &self.sql,
                    persistent,
                    id,
                    precondition,
                    (write, None),
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

#[async_trait::async_trait]
impl ConditionalWrites for PostgresStore {
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
        let written = self
            .guarded(id, precondition, &self.sql.update, &args)
            .await;
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
            .guarded(id, precondition, &self.sql.delete, &args)
            .await;
        Ok(match written.or_store_error()? {
            Conditional::Done(rows) => Conditional::Done(rows.is_some_and(|rows| !rows.is_empty())),
            Conditional::Refused(current) => Conditional::Refused(current),
        })
    }
}
