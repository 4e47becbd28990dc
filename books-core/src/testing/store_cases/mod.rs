//! The storage contract, case by case, one file per tier (run through
//! [`store_conformance_suite!`](crate::store_conformance_suite)); this module holds what
//! the cases share: the [`Fixture`] a case drives (the store, how its authors are seeded,
//! writes made from outside it), and helpers.

#![allow(missing_docs)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};

use crate::store::{AuthorStore, BookInput, BookStore, ListQuery, StoreError, Tiers, Versions};

mod conditional_writes;
mod data;
mod data_at_scale;
mod idempotent_creates;
mod list_queries;
mod vanishing;
mod versions;

pub use conditional_writes::*;
pub use data::*;
pub use data_at_scale::*;
pub use idempotent_creates::*;
pub use list_queries::*;
pub use versions::*;

/// A store the conformance suite can drive.
pub trait TestStore: BookStore + Clone {}
impl<S: BookStore + Clone> TestStore for S {}

/// A write made to a store's data from outside the store, as a host's own SQL (or
/// another process) would make it: the suite runs these between and beside its reads,
/// and a store must see each as it sees its own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutsideWrite {
    /// `INSERT` a book (its id from the database, its times whatever the hook likes).
    AddBook {
        title: String,
        author_id: i64,
        year: i32,
    },
    /// `UPDATE` a book's title.
    Retitle { id: i64, title: String },
    /// `DELETE` a book.
    DeleteBook { id: i64 },
    /// `UPDATE` an author's name (it shows in books read with `include=author`).
    RenameAuthor { id: i64, name: String },
    /// Copies every table the store keeps (books, authors, and whatever keeps its
    /// version) aside as snapshot `name`, as a backup would.
    Snapshot { name: String },
    /// Puts snapshot `name` back in place of every table's rows, as restoring a backup
    /// under running processes would (or a failover to a standby that missed the writes
    /// since): the store's data *and version* go back to the snapshot's. The version's
    /// table goes back last (putting the rows back fires its triggers), in the same
    /// transaction; id sequences may stay where they are.
    Restore { name: String },
}

type Hook<S> =
    Box<dyn Fn(S, OutsideWrite) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How the suite writes a store's data from outside it: a hook that writes through the
/// store's own backend (a second connection, the host's SQL). Cases that need it are
/// generated only for a store that gives one.
pub struct Outside<S> {
    hook: Hook<S>,
}

impl<S: Clone> Outside<S> {
    /// Writes through `hook(store, write)`.
    pub fn through<F, Fut>(hook: F) -> Self
    where
        F: Fn(S, OutsideWrite) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            hook: Box::new(move |store, write| Box::pin(hook(store, write))),
        }
    }

    /// Makes `write` to `store`'s data from outside it.
    pub async fn write(&self, store: S, write: OutsideWrite) {
        (self.hook)(store, write).await;
    }
}

/// How the suite adds and removes authors, which the API itself never writes: through
/// the store's own [`AuthorStore`] ([`ThroughStore`], the default), or as a host seeds
/// its own authors table for a store whose authors are read-only (the host's SQL on its
/// own pool).
#[async_trait]
pub trait SeedAuthors<S>: Send + Sync {
    /// Adds an author (the name may be null) and returns its id.
    async fn add_author(&self, store: &S, name: Option<&str>) -> Result<i64, StoreError>;
    /// Removes an author; its books keep existing with no author. `false`: no such author.
    async fn remove_author(&self, store: &S, id: i64) -> Result<bool, StoreError>;
}

/// Seeds authors through the store's own [`AuthorStore`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ThroughStore;

#[async_trait]
impl<S: AuthorStore + Sync> SeedAuthors<S> for ThroughStore {
    async fn add_author(&self, store: &S, name: Option<&str>) -> Result<i64, StoreError> {
        store.add_author(name).await
    }
    async fn remove_author(&self, store: &S, id: i64) -> Result<bool, StoreError> {
        store.remove_author(id).await
    }
}

/// What a case drives: a fresh store (it derefs to it), how authors are seeded, and
/// writes from outside the store when its suite gave a hook. Cloning is cheap.
pub struct Fixture<S> {
    store: S,
    authors: Arc<dyn SeedAuthors<S>>,
    outside: Option<Arc<Outside<S>>>,
    settle: Option<Settle<S>>,
}

/// Waits until the version a store knows without asking has caught up with the one it
/// reads.
type Settle<S> =
    Arc<dyn for<'a> Fn(&'a S) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> + Send + Sync>;

impl<S: Clone> Clone for Fixture<S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            authors: self.authors.clone(),
            outside: self.outside.clone(),
            settle: self.settle.clone(),
        }
    }
}

impl<S> std::ops::Deref for Fixture<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.store
    }
}

impl<S: TestStore> Fixture<S> {
    /// `store`, its authors seeded by `authors`, written from outside by `outside`.
    pub fn new(
        store: S,
        authors: impl SeedAuthors<S> + 'static,
        outside: Option<Outside<S>>,
    ) -> Self {
        Self {
            store,
            authors: Arc::new(authors),
            outside: outside.map(Arc::new),
            settle: None,
        }
    }

    /// This fixture for a store with versions: [`settle`](Self::settle) waits (up to
    /// 5 s) for a version the store knows without asking to catch up.
    pub fn settling(self) -> Self
    where
        S: Versions,
    {
        Self {
            settle: Some(Arc::new(|store| Box::pin(versions::caught_up(store)))),
            ..self
        }
    }

    /// Waits until what the API's cache would trust of the store's version is current
    /// (for a store that knows its version without asking: pushed by the database,
    /// within the bound it documents); at once for any other.
    pub async fn settle(&self) {
        if let Some(settle) = &self.settle {
            settle(&self.store).await;
        }
    }

    /// The store itself.
    pub fn store(&self) -> S {
        self.store.clone()
    }

    /// Makes `write` from outside the store. Cases that call it are generated only for a
    /// store whose suite gave a hook.
    pub async fn outside(&self, write: OutsideWrite) {
        let outside = self
            .outside
            .as_ref()
            .expect("a case that writes from outside runs only with an outside-writes hook");
        (outside.hook)(self.store.clone(), write).await;
    }
}

/// Authors, as the suite seeds them.
#[async_trait]
impl<S: TestStore> AuthorStore for Fixture<S> {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        self.authors.add_author(&self.store, name).await
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        self.authors.remove_author(&self.store, id).await
    }
}

/// The tiers the suite was asked to run, by their names in the macro
/// (`versions`, `version_tally`, `conditional_writes`, `idempotent_creates`,
/// `list_queries`; `known_version` is part of the versions tier).
pub fn tiers_named(names: &[&str]) -> Tiers {
    let mut tiers = Tiers::default();
    for name in names {
        match *name {
            "versions" | "known_version" => tiers.versions = true,
            "version_tally" => tiers.version_tally = true,
            "conditional_writes" => tiers.conditional_writes = true,
            "idempotent_creates" => tiers.idempotent_creates = true,
            "list_queries" => tiers.list_queries = true,
            other => panic!("no tier is named {other}"),
        }
    }
    tiers
}

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, day, 10, 4, 5).unwrap()
}

fn input(title: &str, author_id: i64, year: i32) -> BookInput {
    BookInput {
        title: title.to_owned(),
        author_id,
        year,
    }
}

fn query(offset: u64, limit: u32) -> ListQuery {
    ListQuery::new(offset, limit)
}

async fn author<S: TestStore>(store: &Fixture<S>, name: &str) -> i64 {
    store.add_author(Some(name)).await.expect("add author")
}

async fn create<S: TestStore>(store: &Fixture<S>, title: &str, author_id: i64) -> i64 {
    store
        .create(&input(title, author_id, 2001), at(1))
        .await
        .expect("create")
        .id
}

async fn titles<S: TestStore>(store: &Fixture<S>, offset: u64, limit: u32) -> (Vec<String>, u64) {
    let page = store.list(&query(offset, limit)).await.expect("list");
    (
        page.books.into_iter().map(|b| b.title).collect(),
        page.total,
    )
}
