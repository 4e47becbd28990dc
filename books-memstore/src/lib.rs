//! An in-memory store for tests, demos and benchmarks, with every tier of the storage
//! seam ([`books_core::store`]). Its version lives in memory, which is exact here and
//! only here: nothing but the store itself can write its data.
//!
//! ```
//! use books_core::store::AuthorStore;
//! use books_core::{BooksApi, Config};
//! use books_memstore::MemStore;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = MemStore::new();
//! let author = store.add_author(Some("Frank Herbert")).await.unwrap();
//! let api = BooksApi::new(store.clone(), Config::default());
//! # let _ = (author, api);
//! # });
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

/// The crate's README (what crates.io shows), its examples compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use books_core::store::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, BooksTally, Capabilities, Conditional,
    ConditionalWrites, IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate,
    ListQueries, ListQuery, Precondition, StoreError, Version, VersionTally, Versions,
};
use chrono::{DateTime, Utc};

/// A concurrent-safe in-memory store; clones share the same data.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    state: Arc<RwLock<State>>,
}

#[derive(Debug, Default)]
struct State {
    books: BTreeMap<i64, Stored>,
    authors: HashMap<i64, Option<String>>,
    last_book_id: i64,
    last_author_id: i64,
    /// Bumped by every write (nothing else can write this store: see the crate's doc).
    version: u64,
    /// Bumped by every write but a create ([`BooksTally::changes`](books_core::store::BooksTally::changes)).
    changes: u64,
    /// Idempotency keys' records and when each expires.
    keys: HashMap<String, (IdempotencyRecord, DateTime<Utc>)>,
}

#[derive(Debug, Clone)]
struct Stored {
    title: String,
    year: i32,
    author_id: Option<i64>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl State {
    fn record(&self, id: i64, book: &Stored) -> BookRecord {
        BookRecord {
            id,
            title: book.title.clone(),
            year: book.year,
            author_id: book.author_id,
            author_name: book
                .author_id
                .and_then(|a| self.authors.get(&a).cloned().flatten()),
            created_at: book.created_at,
            updated_at: book.updated_at,
        }
    }
}

impl State {
    fn create(&mut self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        if !self.authors.contains_key(&book.author_id) {
            return Err(StoreError::AuthorNotFound(book.author_id));
        }
        self.version += 1;
        self.last_book_id += 1;
        let id = self.last_book_id;
        let stored = Stored {
            title: book.title.clone(),
            year: book.year,
            author_id: Some(book.author_id),
            created_at: now,
            updated_at: now,
        };
        let record = self.record(id, &stored);
        self.books.insert(id, stored);
        Ok(record)
    }

    fn update(
        &mut self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        if !self.books.contains_key(&id) {
            return Ok(None);
        }
        if !self.authors.contains_key(&book.author_id) {
            return Err(StoreError::AuthorNotFound(book.author_id));
        }
        self.version += 1;
        self.changes += 1;
        let stored = self.books.get_mut(&id).expect("checked above");
        stored.title.clone_from(&book.title);
        stored.year = book.year;
        stored.author_id = Some(book.author_id);
        stored.updated_at = now;
        Ok(self.books.get(&id).map(|book| self.record(id, book)))
    }

    /// Whether the book exists and `precondition` refuses it: the book, if so.
    fn refused(&self, id: i64, precondition: Precondition<'_>) -> Option<BookRecord> {
        let book = self.books.get(&id).map(|book| self.record(id, book))?;
        (!precondition(&book)).then_some(book)
    }
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The state for a write, which bumps the version.
    fn write(&self) -> RwLockWriteGuard<'_, State> {
        let mut state = self.lock();
        state.version += 1;
        state.changes += 1;
        state
    }

    /// The state for a write that bumps the version itself, if it writes.
    fn lock(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn page(&self, query: &ListQuery) -> BookPage {
        let skip = usize::try_from(query.offset).unwrap_or(usize::MAX);
        let limit = query.limit as usize;
        if query.is_plain() {
            let books = self.books.iter().skip(skip).take(limit);
            return BookPage {
                books: books.map(|(&id, book)| self.record(id, book)).collect(),
                total: self.books.len() as u64,
            };
        }
        // Filtered or sorted: every book the filter keeps, in the query's order.
        let mut kept: Vec<BookRecord> = self
            .books
            .iter()
            .map(|(&id, book)| self.record(id, book))
            .filter(|book| query.matches(book))
            .collect();
        kept.sort_by(|a, b| query.compare(a, b));
        let total = kept.len() as u64;
        BookPage {
            books: kept.into_iter().skip(skip).take(limit).collect(),
            total,
        }
    }

    fn book(&self, id: i64) -> Option<BookRecord> {
        self.books.get(&id).map(|book| self.record(id, book))
    }
}

#[async_trait]
impl BookStore for MemStore {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        Ok(self.read().page(query))
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        Ok(self.read().book(id))
    }

    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        self.lock().create(book, now)
    }

    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        self.lock().update(id, book, now)
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        Ok(self.write().books.remove(&id).is_some())
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        Ok(self.read().authors.contains_key(&id))
    }

    /// Always ready: nothing to reach.
    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
        Capabilities::of(self)
            .version_tally()
            .conditional_writes()
            .idempotent_creates()
            .list_queries()
    }
}

/// The version in memory: every write of the store bumps it under the state's lock.
#[async_trait]
impl Versions for MemStore {
    /// One history: nothing but this process writes the store.
    async fn version(&self) -> Result<Version, StoreError> {
        Ok(Version::new(0, self.read().version))
    }

    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        let state = self.read();
        Ok((state.page(query), state.version))
    }

    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        let state = self.read();
        Ok((state.book(id), state.version))
    }

    /// Always known: the version lives in this process.
    fn known_version(&self) -> Option<Version> {
        Some(Version::new(0, self.read().version))
    }
}

#[async_trait]
impl VersionTally for MemStore {
    async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError> {
        let state = self.read();
        let count_above = match above.checked_add(1) {
            Some(next) => state.books.range(next..).count() as u64,
            None => 0,
        };
        let tally = BooksTally {
            changes: state.changes,
            total: state.books.len() as u64,
            max_id: state.books.keys().next_back().copied().unwrap_or(0),
            above,
            count_above,
        };
        Ok((Version::new(0, state.version), tally))
    }
}

/// Filters and sorts under the read lock, from the same state as the total.
impl ListQueries for MemStore {}

/// The check and the write under one lock.
#[async_trait]
impl ConditionalWrites for MemStore {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        let mut state = self.lock();
        if let Some(current) = state.refused(id, precondition) {
            return Ok(Conditional::Refused(current));
        }
        state.update(id, book, now).map(Conditional::Done)
    }

    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let mut state = self.lock();
        if let Some(current) = state.refused(id, precondition) {
            return Ok(Conditional::Refused(current));
        }
        let deleted = state.books.remove(&id).is_some();
        state.version += u64::from(deleted);
        state.changes += u64::from(deleted);
        Ok(Conditional::Done(deleted))
    }
}

/// The book and its key's record under one lock.
#[async_trait]
impl IdempotentCreates for MemStore {
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        let mut state = self.lock();
        if state
            .keys
            .get(&key.key)
            .is_some_and(|(_, expires_at)| *expires_at > now)
        {
            return Ok(KeyedCreate::Taken);
        }
        let created = state.create(book, now)?;
        let record = IdempotencyRecord {
            fingerprint: key.fingerprint.clone(),
            answer: (key.answer)(&created),
        };
        state.keys.insert(key.key.clone(), (record, key.expires_at));
        Ok(KeyedCreate::Created(created))
    }

    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let state = self.read();
        Ok(state
            .keys
            .get(key)
            .filter(|(_, expires_at)| *expires_at > now)
            .map(|(record, _)| record.clone()))
    }

    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let expired: Vec<String> = state
            .keys
            .iter()
            .filter(|(_, (_, expires_at))| *expires_at <= now)
            .map(|(key, _)| key.clone())
            .take(limit as usize)
            .collect();
        for key in &expired {
            state.keys.remove(key);
        }
        Ok(expired.len() as u64)
    }
}

#[async_trait]
impl AuthorStore for MemStore {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        let mut state = self.write();
        state.last_author_id += 1;
        let id = state.last_author_id;
        state.authors.insert(id, name.map(str::to_owned));
        Ok(id)
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        let mut state = self.write();
        if state.authors.remove(&id).is_none() {
            return Ok(false);
        }
        for book in state.books.values_mut() {
            if book.author_id == Some(id) {
                book.author_id = None;
            }
        }
        Ok(true)
    }
}
