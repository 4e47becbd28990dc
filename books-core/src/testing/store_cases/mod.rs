//! The storage contract, case by case, one file per tier (run through
//! [`store_conformance_suite!`](crate::store_conformance_suite)); this module holds what
//! the cases share: the store a case drives, writes made from outside the store, and
//! helpers.

#![allow(missing_docs)]

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, TimeZone, Utc};

use crate::store::{AuthorStore, BookInput, BookStore, ListQuery, Tiers};

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
pub trait TestStore: BookStore + AuthorStore + Clone {}
impl<S: BookStore + AuthorStore + Clone> TestStore for S {}

/// A write made to a store's data from outside the store, as a host's own SQL (or
/// another process) would make it: the suite's versions tier runs these between its
/// reads, and a store's version must move with each.
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
}

type Hook<S> =
    Box<dyn Fn(S, OutsideWrite) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How the suite writes a store's data from outside it: a hook that writes through the
/// store's own backend (a second connection, the host's SQL), or none for a store
/// nothing else can write (an in-memory one).
pub struct Outside<S> {
    hook: Option<Hook<S>>,
}

impl<S: Clone> Outside<S> {
    /// Nothing but the store itself can write its data.
    pub fn impossible() -> Self {
        Self { hook: None }
    }

    /// Writes through `hook(store, write)`.
    pub fn through<F, Fut>(hook: F) -> Self
    where
        F: Fn(S, OutsideWrite) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            hook: Some(Box::new(move |store, write| Box::pin(hook(store, write)))),
        }
    }

    /// Whether writes from outside can be made.
    pub fn possible(&self) -> bool {
        self.hook.is_some()
    }

    /// Makes `write` from outside `store`; `false` (nothing written) when that is
    /// impossible.
    pub async fn write(&self, store: &S, write: OutsideWrite) -> bool {
        match &self.hook {
            Some(hook) => {
                hook(store.clone(), write).await;
                true
            }
            None => false,
        }
    }
}

/// The tiers the suite was asked to run, by their names in the macro
/// (`versions`, `version_tally`, `conditional_writes`, `idempotent_creates`,
/// `list_queries`).
pub fn tiers_named(names: &[&str]) -> Tiers {
    let mut tiers = Tiers::default();
    for name in names {
        match *name {
            "versions" => tiers.versions = true,
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

async fn author(store: &impl TestStore, name: &str) -> i64 {
    store.add_author(Some(name)).await.expect("add author")
}

async fn create(store: &impl TestStore, title: &str, author_id: i64) -> i64 {
    store
        .create(&input(title, author_id, 2001), at(1))
        .await
        .expect("create")
        .id
}

async fn titles(store: &impl TestStore, offset: u64, limit: u32) -> (Vec<String>, u64) {
    let page = store.list(&query(offset, limit)).await.expect("list");
    (
        page.books.into_iter().map(|b| b.title).collect(),
        page.total,
    )
}
