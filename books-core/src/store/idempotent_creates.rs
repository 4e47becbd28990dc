//! The idempotent creates tier: `Idempotency-Key`, exactly once across crashes.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{BookInput, BookRecord, StoreError};

/// An answer kept for an idempotency key, replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    /// The status (201).
    pub status: u16,
    /// `Content-Type`, in the format first answered.
    pub content_type: String,
    /// `Location`.
    pub location: String,
    /// `ETag`.
    pub etag: String,
    /// The body.
    pub body: Vec<u8>,
}

/// What a store keeps for an idempotency key: the request's fingerprint and the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The fingerprint of the request that used the key first.
    pub fingerprint: Vec<u8>,
    /// The answer it got.
    pub answer: StoredAnswer,
}

/// Renders the answer to keep for the book a keyed create wrote; the store calls it
/// inside the write's transaction, after the book is written.
pub type RenderAnswer = Arc<dyn Fn(&BookRecord) -> StoredAnswer + Send + Sync>;

/// A create's idempotency key and what to keep with it (in the book's transaction).
#[derive(Clone)]
pub struct IdempotencyKey {
    /// The key (1 to 255 visible ASCII characters), global to the store.
    pub key: String,
    /// The request's fingerprint.
    pub fingerprint: Vec<u8>,
    /// When the record may be forgotten.
    pub expires_at: DateTime<Utc>,
    /// The answer to keep, rendered from the written book.
    pub answer: RenderAnswer,
}

impl std::fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyKey")
            .field("key", &self.key)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// The outcome of a keyed create ([`IdempotentCreates::create_keyed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyedCreate {
    /// The book, written with the key's record.
    Created(BookRecord),
    /// A record for the key was committed first (another request, another process):
    /// nothing was written. Read it with [`IdempotentCreates::idempotency_record`].
    Taken,
}

/// Idempotent creates: a key's record is written in the book's own transaction.
///
/// The rules:
///
/// 1. [`create_keyed`](Self::create_keyed) writes the book and the key's record (its
///    fingerprint and the answer `key.answer` renders from the written book) in one
///    transaction: both are stored or neither, whatever crashes.
/// 2. An unexpired record for the key committed first makes it [`KeyedCreate::Taken`]
///    and writes nothing; a concurrent create with the same key waits for the first to
///    commit or roll back (a unique key does this). A record that expired is replaced.
/// 3. A failed create (a missing author: [`StoreError::AuthorNotFound`]) keeps nothing
///    for its key.
/// 4. [`idempotency_record`](Self::idempotency_record) reads what the primary holds
///    (never a replica that may lag).
///
/// Without this tier the API answers a create that carries `Idempotency-Key` with 501
/// (it never creates a second book for a retried key).
///
/// ```
/// use books_core::store::{BookInput, BookRecord, IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate, StoreError};
/// use chrono::{DateTime, Utc};
/// use std::collections::HashMap;
/// use std::sync::Mutex;
///
/// /// Books and keys under one lock: the book and its key's record in one step.
/// #[derive(Default)]
/// struct Store(Mutex<(Vec<BookRecord>, HashMap<String, (IdempotencyRecord, DateTime<Utc>)>)>);
///
/// #[async_trait::async_trait]
/// impl IdempotentCreates for Store {
///     async fn create_keyed(&self, book: &BookInput, now: DateTime<Utc>, key: &IdempotencyKey)
///         -> Result<KeyedCreate, StoreError> {
///         let mut state = self.0.lock().unwrap();
///         if state.1.get(&key.key).is_some_and(|(_, expires)| *expires > now) {
///             return Ok(KeyedCreate::Taken);
///         }
///         let written = BookRecord {
///             id: state.0.len() as i64 + 1, title: book.title.clone(), year: book.year,
///             author_id: Some(book.author_id), author_name: None, created_at: now, updated_at: now,
///         };
///         let record = IdempotencyRecord { fingerprint: key.fingerprint.clone(), answer: (key.answer)(&written) };
///         state.0.push(written.clone());
///         state.1.insert(key.key.clone(), (record, key.expires_at));
///         Ok(KeyedCreate::Created(written))
///     }
///     async fn idempotency_record(&self, key: &str, now: DateTime<Utc>) -> Result<Option<IdempotencyRecord>, StoreError> {
///         let state = self.0.lock().unwrap();
///         Ok(state.1.get(key).filter(|(_, expires)| *expires > now).map(|(record, _)| record.clone()))
///     }
///     async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
///         let mut state = self.0.lock().unwrap();
///         let expired: Vec<String> = state.1.iter().filter(|(_, (_, e))| *e <= now)
///             .map(|(k, _)| k.clone()).take(limit as usize).collect();
///         expired.iter().for_each(|k| { state.1.remove(k); });
///         Ok(expired.len() as u64)
///     }
/// }
/// ```
#[async_trait]
pub trait IdempotentCreates: Send + Sync {
    /// [`BookStore::create`](super::BookStore::create) and `key`'s record, atomically.
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError>;

    /// The record kept for `key`, unless it expired at or before `now`.
    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;

    /// Forgets at most `limit` records that expired at or before `now`; how many. The API
    /// calls it after a keyed create, at most once a minute per process.
    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError>;
}
