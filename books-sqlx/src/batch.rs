//! Group commit for creates: the creates that arrive while one write is under way go
//! together in the next one (one statement), so a burst of creates costs one commit (and
//! on PostgreSQL one trigger run, on SQLite one write of the title trigrams) instead of
//! one each. A lone create is written at once, as before.
//!
//! Nothing is acknowledged before its own write commits, every book gets its own result
//! (a missing author fails that book only), and a create whose caller went away before
//! its write was sent is not written. The writes run on a task of their own, so a caller
//! that goes away mid-write does not stall the others.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use books_core::store::{BookInput, BookRecord, IdempotencyKey, KeyedCreate, StoreError};
use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::oneshot;

use crate::error;

/// The most books one write takes; the rest wait for the next.
pub(crate) const MAX_BATCH: usize = 128;

/// One create: the book, its timestamp, and its idempotency key if it has one (its
/// record is written in the same transaction as the book).
#[derive(Debug)]
pub struct NewBook {
    pub(crate) book: BookInput,
    pub(crate) now: DateTime<Utc>,
    pub(crate) key: Option<IdempotencyKey>,
}

impl NewBook {
    /// A create of `book` at `now` to the microsecond: what every database keeps, so
    /// each written row is told apart by it from books created within a microsecond.
    pub(crate) fn new(book: &BookInput, now: DateTime<Utc>, key: Option<IdempotencyKey>) -> Self {
        Self {
            book: book.clone(),
            now: now.trunc_subsecs(6),
            key,
        }
    }
}

/// One book's result ([`KeyedCreate::Taken`] only for a keyed create).
pub(crate) type Created = Result<KeyedCreate, StoreError>;

/// How a store writes creates, alone and together.
pub(crate) trait CreateWriter: Clone + Send + Sync + 'static {
    /// One book, in one statement.
    fn create_one(&self, book: &NewBook) -> impl Future<Output = Created> + Send;

    /// Several books in one commit: each one's result (a missing author is that book's
    /// [`StoreError::AuthorNotFound`]); `None` when they cannot be written together
    /// (nothing was: write them one at a time); or the error that failed the whole
    /// write, in which case nothing was written either.
    fn create_all(
        &self,
        books: &[NewBook],
    ) -> impl Future<Output = Result<Option<Vec<Created>>, sqlx::Error>> + Send;
}

/// The creates waiting for a write, and whether a task is writing them.
#[derive(Debug, Default)]
pub(crate) struct Creates {
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: Vec<Waiting>,
    writing: bool,
}

#[derive(Debug)]
struct Waiting {
    book: NewBook,
    reply: oneshot::Sender<Created>,
}

impl Creates {
    /// Queues `book` and waits for the write that takes it, at most
    /// [`PRIMARY_TIMEOUT`](crate::PRIMARY_TIMEOUT) in all (past it: unavailable; a book
    /// still queued then is not written, one whose write is under way may be); starts the
    /// writing task when none runs. One task, one batch at a time: two batches under way
    /// at once can commit out of their ids' order (a later batch's ids visible first), which
    /// the API's cache must read as a write among its pages, and drop them.
    pub(crate) async fn create<S: CreateWriter>(
        self: &Arc<Self>,
        store: &S,
        book: NewBook,
    ) -> Created {
        let (reply, created) = oneshot::channel();
        let start = {
            let mut queue = self.lock();
            queue.waiting.push(Waiting { book, reply });
            !std::mem::replace(&mut queue.writing, true)
        };
        if start {
            tokio::spawn(self.clone().write(store.clone()));
        }
        // Each write is bounded, but a create queued behind another waited for both.
        match tokio::time::timeout(crate::PRIMARY_TIMEOUT, created).await {
            Ok(created) => {
                created.unwrap_or_else(|_| Err(StoreError::unavailable("the write was abandoned")))
            }
            Err(_) => Err(StoreError::unavailable(error::TimedOut(
                crate::PRIMARY_TIMEOUT,
            ))),
        }
    }

    /// Writes batches until none is waiting.
    async fn write(self: Arc<Self>, store: impl CreateWriter) {
        let mut stopped = Stopped {
            creates: &self,
            finished: false,
        };
        loop {
            let batch: Vec<Waiting> = {
                let mut queue = self.lock();
                queue.waiting.retain(|waiting| !waiting.reply.is_closed());
                if queue.waiting.is_empty() {
                    queue.writing = false;
                    break;
                }
                let take = queue.waiting.len().min(MAX_BATCH);
                queue.waiting.drain(..take).collect()
            };
            let (books, replies): (Vec<NewBook>, Vec<_>) = batch
                .into_iter()
                .map(|waiting| (waiting.book, waiting.reply))
                .unzip();
            for (reply, created) in replies.into_iter().zip(write(&store, &books).await) {
                // The caller may have gone away since; its book is written all the same.
                let _ = reply.send(created);
            }
        }
        stopped.finished = true;
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Dropped with a writing task: if it did not finish (its runtime shut down, a panic),
/// lets the next create start another and fails the waiting ones rather than leave them
/// hanging.
struct Stopped<'a> {
    creates: &'a Creates,
    finished: bool,
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut queue = self.creates.lock();
            queue.writing = false;
            queue.waiting.clear();
        }
    }
}

/// One batch's results, one per book. A failed batch of several books is retried one
/// book at a time, so a book that fails the whole statement (a host's trigger, an author
/// removed between the read and the foreign-key check) fails alone; if the database was
/// unavailable, every book gets that error instead.
async fn write(store: &impl CreateWriter, books: &[NewBook]) -> Vec<Created> {
    if let [book] = books {
        return vec![store.create_one(book).await];
    }
    match store.create_all(books).await {
        Ok(Some(created)) => created,
        Err(failed) if error::is_unavailable(&failed) => {
            let failed = Arc::new(failed);
            books
                .iter()
                .map(|_| Err(StoreError::unavailable(error::Shared(failed.clone()))))
                .collect()
        }
        Ok(None) | Err(_) => {
            let mut created = Vec::with_capacity(books.len());
            for book in books {
                created.push(store.create_one(book).await);
            }
            created
        }
    }
}

/// The books as a JSON array of `[title, author id, year, time]` (the time as `at`
/// writes it), for a one-statement insert of them all (SQLite, MariaDB). Tuples, written
/// from borrowed fields: a `serde_json::Value` object per book cost 5% of a create's CPU.
#[cfg(any(feature = "sqlite", feature = "mysql"))]
pub(crate) fn as_json(books: &[NewBook], at: impl Fn(&DateTime<Utc>) -> String) -> String {
    let rows: Vec<(&str, i64, i32, String)> = books
        .iter()
        .map(|new| {
            let book = &new.book;
            (book.title.as_str(), book.author_id, book.year, at(&new.now))
        })
        .collect();
    serde_json::to_string(&rows).expect("strings and numbers serialize")
}

/// Which written row is whose: each row goes to a book with the same title, author, year
/// and timestamp (to the microsecond, [`NewBook::new`]; books alike in all four are alike
/// to their callers too), and a book no row went to was not written (its author is
/// missing). `None` when a row matches no book: something (a host's trigger) changed what
/// was written, and who wrote which row cannot be told.
pub(crate) fn attribute(books: &[NewBook], rows: Vec<BookRecord>) -> Option<Vec<Created>> {
    let mut created: Vec<Created> = books
        .iter()
        .map(|new| Err(StoreError::AuthorNotFound(new.book.author_id)))
        .collect();
    for row in rows {
        let whose = books.iter().zip(&created).position(|(new, created)| {
            created.is_err()
                && row.title == new.book.title
                && row.author_id == Some(new.book.author_id)
                && row.year == new.book.year
                && row.created_at == new.now
        })?;
        created[whose] = Ok(KeyedCreate::Created(row));
    }
    Some(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(title: &str, author_id: i64) -> NewBook {
        NewBook {
            book: BookInput {
                title: title.to_owned(),
                author_id,
                year: 2020,
            },
            now: DateTime::UNIX_EPOCH,
            key: None,
        }
    }

    fn row(id: i64, new: &NewBook) -> BookRecord {
        BookRecord {
            id,
            title: new.book.title.clone(),
            year: new.book.year,
            author_id: Some(new.book.author_id),
            author_name: None,
            created_at: new.now,
            updated_at: new.now,
        }
    }

    #[test]
    fn rows_go_to_the_books_they_match() {
        let books = [new("a", 1), new("b", 9), new("a", 1), new("c", 1)];
        let rows = vec![row(7, &books[3]), row(5, &books[0]), row(6, &books[2])];
        let created = attribute(&books, rows).expect("every row matches");
        let ids: Vec<_> = created
            .iter()
            .map(|c| match c {
                Ok(KeyedCreate::Created(book)) => Ok(book.id),
                _ => Err(()),
            })
            .collect();
        assert!(matches!(ids[..], [Ok(5), Err(_), Ok(6), Ok(7)]), "{ids:?}");
        assert!(matches!(created[1], Err(StoreError::AuthorNotFound(9))));
    }

    #[test]
    fn a_row_changed_on_its_way_is_nobodys() {
        let books = [new("a", 1), new("b", 1)];
        let mut changed = row(2, &books[1]);
        changed.title = "B".to_owned();
        assert!(attribute(&books, vec![row(1, &books[0]), changed]).is_none());
        let twice = vec![row(1, &books[0]), row(2, &books[0])];
        assert!(attribute(&books, twice).is_none(), "one book, two rows");
    }
}
