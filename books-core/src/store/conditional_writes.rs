//! The conditional writes tier: `If-Match` without lost updates.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{BookInput, BookRecord, StoreError};

/// What a conditional write requires of the book as it is when the write applies:
/// `true` lets the write go on. The API's is "one of `If-Match`'s tags is the book's
/// current `ETag`".
pub type Precondition<'a> = &'a (dyn Fn(&BookRecord) -> bool + Send + Sync);

/// The outcome of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional<T> {
    /// The write's own outcome: done, or no such book (the precondition was not asked).
    Done(T),
    /// The book exists and the precondition refused it: nothing changed. The book as it
    /// was when refused (its `ETag` goes into the 412).
    Refused(BookRecord),
}

/// Atomic conditional writes: the check of `If-Match` and the write are one step.
///
/// The rules:
///
/// 1. The precondition is asked about the book *as it is when the write applies*,
///    joined with its author (the name shows in the book's answers), and the write
///    happens only if it holds; a missing book is not asked about.
/// 2. Check and write are atomic against every other writer: hold the book's row (and its
///    author's) locked from the check to the commit, or the whole database's write lock,
///    so that of concurrent conditional writes that expect the same book exactly one goes
///    on, whatever other processes or a host's SQL write meanwhile.
/// 3. Otherwise as [`BookStore::update`](super::BookStore::update) and
///    [`BookStore::delete`](super::BookStore::delete): a missing author is
///    [`StoreError::AuthorNotFound`].
///
/// Without this tier the API answers a `PUT` or `DELETE` that carries `If-Match` with 501
/// (it never checks and writes in two steps, which could lose an update).
///
/// ```
/// use books_core::store::{BookInput, BookRecord, Conditional, ConditionalWrites, Precondition, StoreError};
/// use chrono::{DateTime, Utc};
/// use std::sync::Mutex;
///
/// /// One lock over the books: the check and the write under it.
/// struct Store(Mutex<Vec<BookRecord>>);
///
/// #[async_trait::async_trait]
/// impl ConditionalWrites for Store {
///     async fn update_if(&self, id: i64, book: &BookInput, now: DateTime<Utc>, precondition: Precondition<'_>)
///         -> Result<Conditional<Option<BookRecord>>, StoreError> {
///         let mut books = self.0.lock().unwrap();
///         let Some(stored) = books.iter_mut().find(|b| b.id == id) else { return Ok(Conditional::Done(None)) };
///         if !precondition(stored) {
///             return Ok(Conditional::Refused(stored.clone()));
///         }
///         (stored.title, stored.year, stored.updated_at) = (book.title.clone(), book.year, now);
///         Ok(Conditional::Done(Some(stored.clone())))
///     }
///     async fn delete_if(&self, id: i64, precondition: Precondition<'_>) -> Result<Conditional<bool>, StoreError> {
///         let mut books = self.0.lock().unwrap();
///         let Some(at) = books.iter().position(|b| b.id == id) else { return Ok(Conditional::Done(false)) };
///         if !precondition(&books[at]) {
///             return Ok(Conditional::Refused(books[at].clone()));
///         }
///         books.remove(at);
///         Ok(Conditional::Done(true))
///     }
/// }
/// ```
#[async_trait]
pub trait ConditionalWrites: Send + Sync {
    /// [`BookStore::update`](super::BookStore::update) if `precondition` holds for the
    /// book as it is when the write applies. `Done(None)`: no book has this id.
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError>;

    /// [`BookStore::delete`](super::BookStore::delete) if `precondition` holds, atomically
    /// as [`update_if`](Self::update_if). `Done(false)`: no book has this id.
    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError>;
}
