//! The store the server serves: in memory, or one of books-sqlx's as its URL names it.

use books_core::store::{AuthorStore, BookStore, StoreError};
use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use books_sqlx::{AnyStore, PoolState, StoreSettings};
use chrono::{DateTime, Utc};

use crate::Error;

/// The store `--database-url` names: `memory`, or a URL [`AnyStore::open`] takes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Store {
    /// `memory`: nothing kept past the process.
    Memory(MemStore),
    /// SQLite, PostgreSQL or MariaDB.
    Sql(AnyStore),
}

impl Store {
    /// Opens (and migrates) the store `url` names, set up as `settings` say.
    pub async fn open(url: &str, settings: &StoreSettings) -> Result<Self, Error> {
        if url != "memory" {
            return match AnyStore::open(url, settings).await {
                Ok(store) => Ok(Self::Sql(store)),
                Err(books_sqlx::Error::UnknownDatabase(url)) => Err(Error::UnknownDatabase(url)),
                Err(books_sqlx::Error::NotForThisDatabase(setting)) => {
                    Err(Error::NotForThisDatabase(flag(setting)))
                }
                Err(books_sqlx::Error::PushNeedsDirectConnection) => Err(Error::PushNeedsNotifyUrl),
                Err(error) => Err(error.into()),
            };
        }
        let sql_only = [
            (settings.push.is_some(), "push"),
            (settings.transaction_pooler, "transaction_pooler"),
            (settings.notify_url.is_some(), "notify_url"),
            (!settings.replica_urls.is_empty(), "replica_urls"),
        ];
        match sql_only.into_iter().find(|(set, _)| *set) {
            Some((_, setting)) => Err(Error::NotForThisDatabase(flag(setting))),
            None => Ok(Self::Memory(MemStore::new())),
        }
    }

    /// Loads the demo data if the store holds no book; whether it did.
    pub async fn load_demo_if_empty(&self, now: DateTime<Utc>) -> Result<bool, Error> {
        async fn load(
            store: &(impl BookStore + AuthorStore),
            now: DateTime<Utc>,
        ) -> Result<bool, Error> {
            Ok(books_core::demo::load_if_empty(store, now).await?)
        }
        match self {
            Self::Memory(store) => load(store, now).await,
            Self::Sql(AnyStore::Sqlite(store)) => load(store, now).await,
            Self::Sql(AnyStore::Postgres(store)) => load(store, now).await,
            Self::Sql(AnyStore::MySql(store)) => load(store, now).await,
        }
    }

    /// The API over this store.
    pub fn api(&self, config: Config) -> BooksApi {
        match self.clone() {
            Self::Memory(store) => BooksApi::new(store, config),
            Self::Sql(AnyStore::Sqlite(store)) => BooksApi::new(store, config),
            Self::Sql(AnyStore::Postgres(store)) => BooksApi::new(store, config),
            Self::Sql(AnyStore::MySql(store)) => BooksApi::new(store, config),
        }
    }

    /// Authors, in whichever store it is.
    fn authors(&self) -> &dyn AuthorStore {
        match self {
            Self::Memory(store) => store,
            Self::Sql(AnyStore::Sqlite(store)) => store,
            Self::Sql(AnyStore::Postgres(store)) => store,
            Self::Sql(AnyStore::MySql(store)) => store,
        }
    }

    /// The store's pools, for metrics (none in memory).
    pub fn pools(&self) -> Vec<PoolState> {
        match self {
            Self::Memory(_) => Vec::new(),
            Self::Sql(store) => store.pools(),
        }
    }
}

/// The server's flag for a [`StoreSettings`] field.
fn flag(setting: &'static str) -> &'static str {
    match setting {
        "push" => "--push",
        "transaction_pooler" => "--transaction-pooler",
        "notify_url" => "--notify-url",
        "replica_urls" => "--replica-url",
        other => other,
    }
}

/// Authors, for the demo data and the tests (the API never writes them).
#[async_trait::async_trait]
impl AuthorStore for Store {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        self.authors().add_author(name).await
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        self.authors().remove_author(id).await
    }
}
