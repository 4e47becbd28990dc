//! How a [`SqlStore`] writes creates for the group commit ([`CreateWriter`]): one alone,
//! or a batch in one transaction (one statement for the rows,
//! [`Engine::insert_many`](crate::backend::Engine::insert_many)), each keyed create's
//! record in the same transaction; on PostgreSQL a batch without keys in one statement
//! that commits by itself ([`Engine::insert_alone`](crate::backend::Engine::insert_alone)).

use books_core::store::{KeyedCreate, StoreError};

use crate::backend::Backend;
use crate::backend::SqlStore;
use crate::batch::{self, CreateWriter, Created, NewBook};
use crate::error::OrStoreError;
use crate::queries;
use crate::rows::StoreRow;
use crate::transactions::{insert_in, keep_key};

impl<DB: Backend> CreateWriter for SqlStore<DB> {
    async fn create_one(&self, new: &NewBook) -> Created {
        if new.key.is_none() {
            return queries::create(self, new).await;
        }
        let persistent = self.persistent();
        let created = DB::retried(self, || async {
            let mut tx = DB::begin(self).await?;
            let created = insert_in::<DB>(&mut tx, &self.sql, persistent, new).await?;
            match created {
                Ok(KeyedCreate::Created(_)) => tx.commit().await?,
                _ => tx.rollback().await?,
            }
            Ok(created)
        });
        created.await.or_store_error()?
    }

    /// One transaction, committed once every row is attributed to its book
    /// ([`batch::attribute`]) and every key's record is kept (a key found taken sends the
    /// batch back, to be written one create at a time).
    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        if DB::inserts_alone(&self.extra) && books.iter().all(|new| new.key.is_none()) {
            let rows = DB::retried(self, || DB::insert_alone(self, books)).await?;
            return Ok(Some(committed(books, &rows)));
        }
        let persistent = self.persistent();
        DB::retried(self, || async {
            let mut tx = DB::begin(self).await?;
            let rows = DB::insert_many(self, &mut tx, books).await?;
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
                if !keep_key::<DB>(&mut tx, &self.sql, persistent, book, new).await? {
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

/// The result of each of `books`, whose rows were written and committed by one statement
/// that refuses rows that are not theirs: should they be told apart none the less, each
/// book gets an error rather than be written again.
fn committed<R: StoreRow>(books: &[NewBook], rows: &[R]) -> Vec<Created> {
    let written: Result<Vec<_>, _> = rows.iter().map(|row| row.book().map(Into::into)).collect();
    match written
        .ok()
        .and_then(|written| batch::attribute(books, written))
    {
        Some(created) => created,
        None => books
            .iter()
            .map(|_| Err(StoreError::other("a batch's rows could not be told apart")))
            .collect(),
    }
}
