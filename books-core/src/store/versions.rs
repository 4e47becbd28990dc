//! The versions tier: what lets the API reuse rendered answers exactly across processes.

use async_trait::async_trait;

use super::{BookPage, BookRecord, ListQuery, StoreError};

/// Where a store's books and authors stand: which history they belong to, and how far
/// along it. Two readings with the same history and count are the same data.
///
/// A database's history is rewritten when it loses writes it had acknowledged (a
/// standby promoted after an asynchronous primary died), goes back to a backup, or is
/// dropped and created again. Each such event gives it a new [`history`](Self::history),
/// or moves [`count`](Self::count) backwards; either way the API's cache drops what it
/// kept before its next answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Version {
    /// Names the history the count counts in: the same for every process reading the
    /// same history, different after a rewrite (where the database can tell; where it
    /// cannot, [`count`](Self::count) moves backwards or to a value it never had).
    pub history: u64,
    /// Grows with every committed write within one history, by steps a store may draw
    /// at random (so that two histories are unlikely ever to reach the same count).
    pub count: u64,
}

impl Version {
    /// A version in the history named `history`.
    pub fn new(history: u64, count: u64) -> Self {
        Self { history, count }
    }
}

/// Exact caching: a version of the books and authors, read with the data.
///
/// With this tier the API keeps rendered book and page answers and serves one again
/// only after a version read *after the request arrived* equals the version the answer
/// was read at (one shared [`version`](Self::version) call answers for every request
/// that arrived before it was sent). So every rule below is about never letting a
/// version stand for data older than it.
///
/// 1. **Every write moves it.** The version changes with every committed write to books
///    or authors *whoever makes it*: this store, another process, the host's own SQL,
///    a migration, an import. A version kept in this process's memory breaks this rule
///    unless nothing else can write the data at all (an in-memory store); a database
///    keeps it itself, bumped by triggers in the writing transaction.
/// 2. **It only grows within a history**: a later write gives a greater
///    [`count`](Version::count). A [`Version::history`] changes when the database's
///    history is rewritten (a lossy failover, a restored backup, a database created
///    again), where the store can tell; the cache takes a count that moves backwards as
///    such a rewrite too.
/// 3. **[`version`](Self::version) is read now**: one round trip sent after the call,
///    never a value remembered from before it.
/// 4. **A read's version is never newer than its data**:
///    [`list_versioned`](Self::list_versioned) and [`get_versioned`](Self::get_versioned)
///    return the count as it stood in the snapshot the data was read in (one statement
///    reading both), or as it stood *before* the data was read. Reading it after the
///    data could pair old data with a new count. (A read's count is compared with the
///    count of the version the cache last checked; a count from another history is
///    unlikely to equal it, and a check tells the histories apart.)
/// 5. **[`known_version`](Self::known_version)** (optional) is never ahead of what
///    `version` reads, and catches up with every write within a bound the store
///    documents, or answers `None`.
///
/// The methods are independent: none calls another, so a store may write
/// [`BookStore::list`](super::BookStore::list) in terms of `list_versioned` (or the other
/// way round) without a loop. The versions tier of the conformance suite checks every
/// rule, with writes the store does not make in between (a hook each store's tests
/// give it): a version kept in memory fails it.
///
/// ```
/// use books_core::store::{BookPage, BookRecord, ListQuery, StoreError, Version, Versions};
/// use std::sync::{Arc, Mutex};
///
/// /// Stands for a database: whoever writes it bumps `version` in the same step.
/// #[derive(Debug, Default)]
/// struct Database { books: Vec<BookRecord>, version: u64 }
///
/// #[derive(Debug)]
/// struct Store { db: Arc<Mutex<Database>> }
///
/// #[async_trait::async_trait]
/// impl Versions for Store {
///     async fn version(&self) -> Result<Version, StoreError> {
///         // Nothing can rewrite this store's history: one history, named 0.
///         Ok(Version::new(0, self.db.lock().unwrap().version))
///     }
///     async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
///         // One snapshot: the data and the version under one lock (one statement in SQL).
///         let db = self.db.lock().unwrap();
///         let skip = usize::try_from(query.offset).unwrap_or(usize::MAX);
///         let books = db.books.iter().skip(skip).take(query.limit as usize).cloned().collect();
///         Ok((BookPage { books, total: db.books.len() as u64 }, db.version))
///     }
///     async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
///         let db = self.db.lock().unwrap();
///         Ok((db.books.iter().find(|b| b.id == id).cloned(), db.version))
///     }
/// }
/// ```
#[async_trait]
pub trait Versions: Send + Sync {
    /// The version as it stands now (rules 1 to 3).
    async fn version(&self) -> Result<Version, StoreError>;

    /// [`BookStore::list`](super::BookStore::list), and the [count](Version::count) the page was read at (rule 4).
    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError>;

    /// [`BookStore::get`](super::BookStore::get), and the [count](Version::count) the book (or its absence) was
    /// read at (rule 4).
    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError>;

    /// The version without a round trip, when this process knows it already (pushed by
    /// the database, as PostgreSQL's push mode does): the cache then trusts it instead of
    /// asking, except right after a write of this process. `None` (the default): ask
    /// [`version`](Self::version). Rule 5.
    fn known_version(&self) -> Option<Version> {
        None
    }
}

/// How the books stood at a version, so that the API's cache can tell creates from
/// other writes and keep its pages across a create (anyone's) instead of dropping them.
///
/// An optional part of the versions tier ([`VersionTally`] needs [`Versions`]). Between
/// two readings `a` and `b`, where `b` was asked about the ids above `a.max_id`, only
/// books with ids above `a.max_id` were added and nothing else was written exactly when
/// `b.changes == a.changes` and `b.count_above == b.total - a.total`
/// ([`only_appended_since`](Self::only_appended_since)): then every book up to
/// `a.max_id`, and its place in the list, is as it was.
///
/// The rules: `changes` moves with every committed write to books or authors except
/// inserts of books, whoever writes (as the version does); every field is read in the
/// same snapshot as the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BooksTally {
    /// Moves with every committed write to books or authors except inserts of books.
    pub changes: u64,
    /// How many books there are.
    pub total: u64,
    /// The greatest book id, 0 when there is none.
    pub max_id: i64,
    /// The id asked about ([`VersionTally::tallied_version`]'s `above`).
    pub above: i64,
    /// How many books have an id greater than `above`.
    pub count_above: u64,
}

impl BooksTally {
    /// Whether `self`, read after `earlier` with `above = earlier.max_id`, differs from
    /// it only by books added with ids above `earlier.max_id` (see the type's doc).
    pub fn only_appended_since(&self, earlier: &BooksTally) -> bool {
        self.above == earlier.max_id
            && self.changes == earlier.changes
            && self.total >= earlier.total
            && self.count_above == self.total - earlier.total
    }
}

/// The version and the books' tally ([`BooksTally`]) in one round trip: the optional
/// part of the versions tier that keeps cached pages across creates.
///
/// ```
/// use books_core::store::{BooksTally, StoreError, Version, VersionTally, Versions};
///
/// struct Store;
/// # #[async_trait::async_trait]
/// # impl Versions for Store {
/// #     async fn version(&self) -> Result<Version, StoreError> { Ok(Version::new(0, 1)) }
/// #     async fn list_versioned(&self, _: &books_core::store::ListQuery) -> Result<(books_core::store::BookPage, u64), StoreError> { Ok((Default::default(), 1)) }
/// #     async fn get_versioned(&self, _: i64) -> Result<(Option<books_core::store::BookRecord>, u64), StoreError> { Ok((None, 1)) }
/// # }
///
/// #[async_trait::async_trait]
/// impl VersionTally for Store {
///     async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError> {
///         // In SQL, one statement: the version, the `changes` counter, COUNT(*),
///         // MAX(id) and the count of ids above `above`, from one snapshot.
///         let tally = BooksTally { changes: 0, total: 0, max_id: 0, above, count_above: 0 };
///         Ok((Version::new(0, 1), tally))
///     }
/// }
/// ```
#[async_trait]
pub trait VersionTally: Versions {
    /// [`Versions::version`] and, in the same snapshot, the books' tally counting books
    /// with ids greater than `above` (`i64::MAX` when there is nothing to compare with).
    async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError>;
}
