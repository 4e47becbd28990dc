//! What a store names beyond the data tier: its capability tiers, typed by the store, and
//! settled once when the API is built.

use std::fmt::Debug;
use std::sync::Arc;

use super::{BookStore, ConditionalWrites, IdempotentCreates, ListQueries, VersionTally, Versions};

/// The capability tiers a store `S` implements beyond the data tier, as
/// [`BookStore::capabilities`] returns them. Each is a trait of its own with its own rules
/// and its own tier of the conformance suite, and each method here names one only where
/// `S` implements it, so a store cannot claim a tier it lacks:
///
/// ```
/// # use std::sync::Arc;
/// # use books_core::store::{Capabilities, BookStore, ConditionalWrites, Versions};
/// # fn f<S: BookStore + Versions + ConditionalWrites>(store: Arc<S>) -> Capabilities<S> {
/// Capabilities::of(store).versions().conditional_writes()
/// # }
/// ```
///
/// **To wrap a store generically, use [`Hooked`](super::Hooked)**: its capabilities are
/// the inner store's, every tier's calls through the wrapper's hook, with no per-tier
/// code, so a generic wrapper cannot drop a tier.
///
/// What is checked, and when:
/// - at compile time, that a store names only tiers it implements itself, and that a
///   hand-written wrapper cannot hand on its inner store's capabilities (which would send
///   every tier's calls past the wrapper): it names its own, and implements each;
/// - at compile time, in the conformance suite, that a store names exactly the tiers its
///   tests list (`capabilities_are_the_tiers_tested`);
/// - at start, with [`checked_api!`](crate::checked_api) instead of
///   [`BooksApi::new`](crate::BooksApi::new), and in the conformance suite, that a store
///   names every tier its type implements: a hand-written wrapper that forwards
///   `ConditionalWrites` but returns `Capabilities::of(self)` is refused, naming the
///   tier (without the check it serves the data tier alone, and answers 501 where a
///   tier is needed; [`BooksApi::tiers`](crate::BooksApi::tiers) says which it serves);
/// - never, that a wrapper implements every tier of the store inside it: nothing asks a
///   wrapper what it wraps. [`Hooked`](super::Hooked) is the wrapper that cannot forget.
///
/// ```compile_fail,E0308
/// # use std::sync::Arc;
/// # use books_core::store::*;
/// # use chrono::{DateTime, Utc};
/// #[derive(Debug)]
/// struct Logged<S>(Arc<S>);
///
/// #[async_trait::async_trait]
/// impl<S: BookStore> BookStore for Logged<S> {
/// #   async fn list(&self, q: &ListQuery) -> Result<BookPage, StoreError> { self.0.list(q).await }
/// #   async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> { self.0.get(id).await }
/// #   async fn create(&self, b: &BookInput, n: DateTime<Utc>) -> Result<BookRecord, StoreError> { self.0.create(b, n).await }
/// #   async fn update(&self, id: i64, b: &BookInput, n: DateTime<Utc>) -> Result<Option<BookRecord>, StoreError> { self.0.update(id, b, n).await }
/// #   async fn delete(&self, id: i64) -> Result<bool, StoreError> { self.0.delete(id).await }
/// #   async fn author_exists(&self, id: i64) -> Result<bool, StoreError> { self.0.author_exists(id).await }
///     // …every data tier method logged and forwarded…
///     fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
///         // Does not compile: these are the inner store's tiers, not this wrapper's.
///         self.0.clone().capabilities()
///     }
/// }
/// ```
///
/// Nor can it name a tier it does not implement itself:
///
/// ```compile_fail,E0277
/// # use std::sync::Arc;
/// # use books_core::store::*;
/// # use chrono::{DateTime, Utc};
/// # #[derive(Debug)]
/// # struct Logged<S>(Arc<S>);
/// #[async_trait::async_trait]
/// impl<S: BookStore + Versions> BookStore for Logged<S> {
/// #   async fn list(&self, q: &ListQuery) -> Result<BookPage, StoreError> { self.0.list(q).await }
/// #   async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> { self.0.get(id).await }
/// #   async fn create(&self, b: &BookInput, n: DateTime<Utc>) -> Result<BookRecord, StoreError> { self.0.create(b, n).await }
/// #   async fn update(&self, id: i64, b: &BookInput, n: DateTime<Utc>) -> Result<Option<BookRecord>, StoreError> { self.0.update(id, b, n).await }
/// #   async fn delete(&self, id: i64) -> Result<bool, StoreError> { self.0.delete(id).await }
/// #   async fn author_exists(&self, id: i64) -> Result<bool, StoreError> { self.0.author_exists(id).await }
///     fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
///         // Does not compile: `Logged<S>` does not implement `Versions`.
///         Capabilities::of(self).versions()
///     }
/// }
/// ```
///
/// A tier that needs another says so as a supertrait ([`VersionTally`] needs
/// [`Versions`]), so one cannot be named without the other.
pub struct Capabilities<S> {
    store: Arc<S>,
    tiers: StoreTiers,
}

/// The tiers of a store, settled: the API's handles on each tier it has.
#[derive(Clone)]
pub(crate) struct StoreTiers {
    pub(crate) data: Arc<dyn BookStore>,
    pub(crate) versions: Option<Arc<dyn Versions>>,
    pub(crate) tally: Option<Arc<dyn VersionTally>>,
    pub(crate) conditional_writes: Option<Arc<dyn ConditionalWrites>>,
    pub(crate) idempotent_creates: Option<Arc<dyn IdempotentCreates>>,
    pub(crate) list_queries: bool,
}

impl<S: BookStore> Capabilities<S> {
    /// The data tier alone, of `store`.
    pub fn of(store: Arc<S>) -> Self {
        Self {
            tiers: StoreTiers {
                data: store.clone(),
                versions: None,
                tally: None,
                conditional_writes: None,
                idempotent_creates: None,
                list_queries: false,
            },
            store,
        }
    }

    /// With [`Versions`]: the API caches rendered answers, exactly.
    pub fn versions(mut self) -> Self
    where
        S: Versions,
    {
        self.tiers.versions = Some(self.store.clone() as Arc<dyn Versions>);
        self
    }

    /// With [`VersionTally`] (and so [`Versions`]): cached pages survive creates.
    pub fn version_tally(mut self) -> Self
    where
        S: VersionTally,
    {
        self.tiers.tally = Some(self.store.clone() as Arc<dyn VersionTally>);
        self.versions()
    }

    /// With [`ConditionalWrites`]: `If-Match` on `PUT` and `DELETE`.
    pub fn conditional_writes(mut self) -> Self
    where
        S: ConditionalWrites,
    {
        self.tiers.conditional_writes = Some(self.store.clone() as Arc<dyn ConditionalWrites>);
        self
    }

    /// With [`IdempotentCreates`]: `Idempotency-Key` on creates.
    pub fn idempotent_creates(mut self) -> Self
    where
        S: IdempotentCreates,
    {
        self.tiers.idempotent_creates = Some(self.store.clone() as Arc<dyn IdempotentCreates>);
        self
    }

    /// With [`ListQueries`]: `filter[…]` and `sort` on the list.
    pub fn list_queries(mut self) -> Self
    where
        S: ListQueries,
    {
        self.tiers.list_queries = true;
        self
    }

    /// Which tiers these are, by name.
    pub fn tiers(&self) -> Tiers {
        self.tiers.names()
    }

    /// `store`'s capabilities as these handles (a [`Hooked`](super::Hooked) store's: its
    /// inner store's tiers, each hooked).
    pub(super) fn settled_as(store: Arc<S>, tiers: StoreTiers) -> Self {
        Self { store, tiers }
    }

    /// The API's handles on the store and each of its tiers.
    pub(crate) fn settled(self) -> StoreTiers {
        self.tiers
    }
}

impl StoreTiers {
    /// Which tiers these are, by name.
    pub(crate) fn names(&self) -> Tiers {
        Tiers {
            versions: self.versions.is_some(),
            version_tally: self.tally.is_some(),
            conditional_writes: self.conditional_writes.is_some(),
            idempotent_creates: self.idempotent_creates.is_some(),
            list_queries: self.list_queries,
        }
    }
}

impl<S: BookStore> Debug for Capabilities<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.tiers().fmt(f)
    }
}

impl Debug for StoreTiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreTiers")
            .field("store", &self.data)
            .field("tiers", &self.names())
            .finish()
    }
}

/// Which capability tiers a store has ([`Capabilities::tiers`]), or which an API serves
/// ([`BooksApi::tiers`](crate::BooksApi::tiers)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tiers {
    /// [`Versions`]: exact caching across processes.
    pub versions: bool,
    /// [`VersionTally`]: cached pages survive creates.
    pub version_tally: bool,
    /// [`ConditionalWrites`]: `If-Match`.
    pub conditional_writes: bool,
    /// [`IdempotentCreates`]: `Idempotency-Key`.
    pub idempotent_creates: bool,
    /// [`ListQueries`]: `filter[…]` and `sort`.
    pub list_queries: bool,
}

impl Tiers {
    /// Every tier.
    pub const ALL: Tiers = Tiers {
        versions: true,
        version_tally: true,
        conditional_writes: true,
        idempotent_creates: true,
        list_queries: true,
    };
}

/// A store whose type implements tier traits its
/// [`capabilities`](BookStore::capabilities) do not name
/// ([`checked_api!`](crate::checked_api)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the store {store} implements {} but its capabilities() do not name {}: add each to \
     its Capabilities (or wrap the inner store in Hooked, which keeps its tiers)",
    .missing.join(", "),
    if .missing.len() == 1 { "it" } else { "them" }
)]
pub struct UndeclaredTiers {
    /// The store's type.
    pub store: &'static str,
    /// The tiers it implements and does not name (`"conditional writes"`).
    pub missing: Vec<&'static str>,
}
