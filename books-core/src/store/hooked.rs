//! A wrapper around any store that keeps every tier the store has: each call, in every
//! tier, runs through a hook of the host's (timing, logging, counting, refusing).

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use super::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, BooksTally, Capabilities, Conditional,
    ConditionalWrites, IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate,
    ListQueries, ListQuery, Precondition, StoreError, StoreTiers, Version, VersionTally, Versions,
};

/// A store call's answer to come, as a [`StoreHook`] receives and returns it.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// What a [`Hooked`] store does around each call to its store.
///
/// ```
/// use books_core::store::{StoreCall, StoreFuture, StoreHook};
///
/// #[derive(Debug)]
/// struct Timed;
///
/// impl StoreHook for Timed {
///     fn around<'a, T: Send + 'a>(
///         &'a self,
///         call: StoreCall,
///         run: StoreFuture<'a, T>,
///     ) -> StoreFuture<'a, T> {
///         Box::pin(async move {
///             let started = std::time::Instant::now();
///             let answer = run.await;
///             tracing::debug!(call = call.name(), elapsed = ?started.elapsed());
///             answer
///         })
///     }
/// }
/// ```
pub trait StoreHook: Debug + Send + Sync + 'static {
    /// Runs `run`, the store's answer to `call`: await it (or not: an error of the hook's
    /// own answers instead) and return what the API gets.
    fn around<'a, T: Send + 'a>(
        &'a self,
        call: StoreCall,
        run: StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T>;
}

/// Which store method a [`StoreHook`] is around.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreCall {
    /// [`BookStore::list`].
    List,
    /// [`BookStore::get`].
    Get,
    /// [`BookStore::create`].
    Create,
    /// [`BookStore::update`].
    Update,
    /// [`BookStore::delete`].
    Delete,
    /// [`BookStore::author_exists`].
    AuthorExists,
    /// [`BookStore::ready`].
    Ready,
    /// [`Versions::version`].
    Version,
    /// [`Versions::list_versioned`].
    ListVersioned,
    /// [`Versions::get_versioned`].
    GetVersioned,
    /// [`VersionTally::tallied_version`].
    TalliedVersion,
    /// [`ConditionalWrites::update_if`].
    UpdateIf,
    /// [`ConditionalWrites::delete_if`].
    DeleteIf,
    /// [`IdempotentCreates::create_keyed`].
    CreateKeyed,
    /// [`IdempotentCreates::idempotency_record`].
    IdempotencyRecord,
    /// [`IdempotentCreates::forget_expired_keys`].
    ForgetExpiredKeys,
}

impl StoreCall {
    /// The method's name (`"list"`, `"update_if"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Get => "get",
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::AuthorExists => "author_exists",
            Self::Ready => "ready",
            Self::Version => "version",
            Self::ListVersioned => "list_versioned",
            Self::GetVersioned => "get_versioned",
            Self::TalliedVersion => "tallied_version",
            Self::UpdateIf => "update_if",
            Self::DeleteIf => "delete_if",
            Self::CreateKeyed => "create_keyed",
            Self::IdempotencyRecord => "idempotency_record",
            Self::ForgetExpiredKeys => "forget_expired_keys",
        }
    }
}

/// A store whose every call, in every tier it has, runs through a [`StoreHook`]: the way
/// to wrap a store generically. Its [`capabilities`](BookStore::capabilities) are the
/// inner store's, each tier's calls hooked, so no tier is dropped and none bypasses the
/// hook; and it implements each tier trait its store implements.
///
/// ```
/// # use books_core::store::{Hooked, StoreCall, StoreFuture, StoreHook};
/// # #[derive(Debug)]
/// # struct Timed;
/// # impl StoreHook for Timed {
/// #     fn around<'a, T: Send + 'a>(&'a self, _: StoreCall, run: StoreFuture<'a, T>) -> StoreFuture<'a, T> { run }
/// # }
/// # fn f(store: impl books_core::store::BookStore) {
/// let api = books_core::BooksApi::new(Hooked::new(store, Timed), books_core::Config::default());
/// # }
/// ```
///
/// Author writes ([`AuthorStore`]) are not store calls of the API's: they pass unhooked.
pub struct Hooked<S: ?Sized, H> {
    hook: Arc<H>,
    store: Arc<S>,
}

impl<S: BookStore, H: StoreHook> Hooked<S, H> {
    /// `store`, each call through `hook`.
    pub fn new(store: S, hook: H) -> Self {
        Self {
            hook: Arc::new(hook),
            store: Arc::new(store),
        }
    }

    /// The store inside.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// One of the store's tier handles, hooked.
    fn hooked<T: ?Sized>(&self, tier: Arc<T>) -> Arc<Hooked<T, H>> {
        Arc::new(Hooked {
            hook: self.hook.clone(),
            store: tier,
        })
    }
}

impl<S: ?Sized, H> Clone for Hooked<S, H> {
    fn clone(&self) -> Self {
        Self {
            hook: self.hook.clone(),
            store: self.store.clone(),
        }
    }
}

impl<S: Debug + ?Sized, H: Debug> Debug for Hooked<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooked")
            .field("store", &self.store)
            .field("hook", &self.hook)
            .finish()
    }
}

#[async_trait]
impl<S: BookStore, H: StoreHook> BookStore for Hooked<S, H> {
    async fn list(&self, query: &ListQuery) -> Result<BookPage, StoreError> {
        self.hook
            .around(StoreCall::List, self.store.list(query))
            .await
    }

    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        self.hook.around(StoreCall::Get, self.store.get(id)).await
    }

    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        let run = self.store.create(book, now);
        self.hook.around(StoreCall::Create, run).await
    }

    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        let run = self.store.update(id, book, now);
        self.hook.around(StoreCall::Update, run).await
    }

    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        self.hook
            .around(StoreCall::Delete, self.store.delete(id))
            .await
    }

    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        let run = self.store.author_exists(id);
        self.hook.around(StoreCall::AuthorExists, run).await
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.hook.around(StoreCall::Ready, self.store.ready()).await
    }

    /// The inner store's tiers, each hooked.
    fn capabilities(self: Arc<Self>) -> Capabilities<Self> {
        let inner = self.store.clone().capabilities().settled();
        let tiers = StoreTiers {
            data: self.clone(),
            versions: inner.versions.map(|t| self.hooked(t) as Arc<dyn Versions>),
            tally: inner.tally.map(|t| self.hooked(t) as Arc<dyn VersionTally>),
            conditional_writes: (inner.conditional_writes)
                .map(|t| self.hooked(t) as Arc<dyn ConditionalWrites>),
            idempotent_creates: (inner.idempotent_creates)
                .map(|t| self.hooked(t) as Arc<dyn IdempotentCreates>),
            list_queries: inner.list_queries,
        };
        Capabilities::settled_as(self, tiers)
    }
}

#[async_trait]
impl<S: Versions + ?Sized, H: StoreHook> Versions for Hooked<S, H> {
    async fn version(&self) -> Result<Version, StoreError> {
        self.hook
            .around(StoreCall::Version, self.store.version())
            .await
    }

    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        let run = self.store.list_versioned(query);
        self.hook.around(StoreCall::ListVersioned, run).await
    }

    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        let run = self.store.get_versioned(id);
        self.hook.around(StoreCall::GetVersioned, run).await
    }

    /// The store's own (no call is made).
    fn known_version(&self) -> Option<Version> {
        self.store.known_version()
    }
}

#[async_trait]
impl<S: VersionTally + ?Sized, H: StoreHook> VersionTally for Hooked<S, H> {
    async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError> {
        let run = self.store.tallied_version(above);
        self.hook.around(StoreCall::TalliedVersion, run).await
    }
}

#[async_trait]
impl<S: ConditionalWrites + ?Sized, H: StoreHook> ConditionalWrites for Hooked<S, H> {
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<Option<BookRecord>>, StoreError> {
        let run = self.store.update_if(id, book, now, precondition);
        self.hook.around(StoreCall::UpdateIf, run).await
    }

    async fn delete_if(
        &self,
        id: i64,
        precondition: Precondition<'_>,
    ) -> Result<Conditional<bool>, StoreError> {
        let run = self.store.delete_if(id, precondition);
        self.hook.around(StoreCall::DeleteIf, run).await
    }
}

#[async_trait]
impl<S: IdempotentCreates + ?Sized, H: StoreHook> IdempotentCreates for Hooked<S, H> {
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &IdempotencyKey,
    ) -> Result<KeyedCreate, StoreError> {
        let run = self.store.create_keyed(book, now, key);
        self.hook.around(StoreCall::CreateKeyed, run).await
    }

    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let run = self.store.idempotency_record(key, now);
        self.hook.around(StoreCall::IdempotencyRecord, run).await
    }

    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let run = self.store.forget_expired_keys(now, limit);
        self.hook.around(StoreCall::ForgetExpiredKeys, run).await
    }
}

impl<S: ListQueries, H: StoreHook> ListQueries for Hooked<S, H> {}

#[async_trait]
impl<S: AuthorStore + ?Sized, H: StoreHook> AuthorStore for Hooked<S, H> {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        self.store.add_author(name).await
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        self.store.remove_author(id).await
    }
}
