//! Group commit for creates: the creates that arrive while one write is under way go
//! together in the next one (one statement), so a burst of creates costs one commit (and
//! on PostgreSQL one trigger run, on SQLite one write of the title trigrams) instead of
//! one each. A lone create is written at once, as before.
//!
//! After a write of [`CROWD`] books or more, the next one waits for as many creates as
//! were just answered, at most as long as that write took and [`MOST_WAIT`] (a write
//! that hung on a failing database must not hold the next one): a write costs nearly the
//! same for 25 books as for 50, so callers that send their next create as soon as one is
//! answered share a write instead of taking turns in two. A wait that gathers fewer than
//! half of them makes the next writes go without one (more of them each time it happens
//! again), so creates among other requests are not held back.
//!
//! Nothing is acknowledged before its own write commits, every book gets its own result
//! (a missing author fails that book only), and a create whose caller went away before
//! its write was sent is not written. The writes run on a task of their own, so a caller
//! that goes away mid-write does not stall the others.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use books_core::store::{BookInput, BookRecord, IdempotencyKey, KeyedCreate, StoreError};
use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::error;

/// The most books one write takes; the rest wait for the next.
pub(crate) const MAX_BATCH: usize = 128;

/// The fewest books a write takes for the next to wait for their callers: fewer are
/// creates among other requests, whose callers are not likely to create again at once.
const CROWD: usize = 8;

/// The longest a write waits for the callers of the one before it.
const MOST_WAIT: Duration = Duration::from_millis(5);

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
    /// Told of each create queued while a task is writing.
    queued: Notify,
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
        } else {
            self.queued.notify_one();
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
        let mut patience = Patience::default();
        let mut last: Option<(usize, Duration)> = None;
        loop {
            if let Some((answered, took)) = last.filter(|&(answered, _)| answered >= CROWD)
                && patience.waits()
            {
                let back = self.gather(answered, took).await;
                patience.record(back * 2 >= answered);
            }
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
            let started = Instant::now();
            let written = write(&store, &books).await;
            last = Some((books.len(), started.elapsed()));
            for (reply, created) in replies.into_iter().zip(written) {
                // The caller may have gone away since; its book is written all the same.
                let _ = reply.send(created);
            }
        }
        stopped.finished = true;
    }

    /// Waits, at most `took` and [`MOST_WAIT`], until `answered` more creates than now
    /// are queued (or a whole batch); returns how many more came.
    async fn gather(&self, answered: usize, took: Duration) -> usize {
        let before = self.lock().waiting.len();
        let enough = (before + answered).min(MAX_BATCH);
        let deadline = Instant::now() + took.min(MOST_WAIT);
        loop {
            let queued = self.queued.notified();
            let now = self.lock().waiting.len();
            if now >= enough || tokio::time::timeout_at(deadline, queued).await.is_err() {
                return self.lock().waiting.len().saturating_sub(before);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether a write waits for the callers just answered: not for the next `skip` writes
/// after a wait that gathered too few, a span that doubles (to 64) each time it happens
/// again and ends with the next wait that pays.
#[derive(Debug, Default)]
struct Patience {
    skip: u32,
    span: u32,
}

impl Patience {
    fn waits(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    fn record(&mut self, paid: bool) {
        if paid {
            self.span = 0;
        } else {
            self.span = (self.span * 2).clamp(1, 64);
            self.skip = self.span;
        }
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
mod tests;
