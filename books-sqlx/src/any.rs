//! The store a database URL names ([`AnyStore::open`]), with the settings a server takes
//! beside the URL ([`StoreSettings`]).

use std::time::Duration;

#[cfg(feature = "mysql")]
use crate::MySqlStore;
#[cfg(feature = "postgres")]
use crate::PostgresStore;
#[cfg(feature = "sqlite")]
use crate::SqliteStore;
use crate::{Error, PoolState};

/// What a store named by URL is set up with, beside the URL.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreSettings {
    /// PostgreSQL's push mode: `Some(true)` turns it on for the database
    /// ([`PostgresStore::set_push`](crate::PostgresStore::set_push)) and listens,
    /// `Some(false)` turns it off, `None` leaves the database alone.
    pub push: Option<bool>,
    /// The URL is a transaction-mode pooler's
    /// ([`transaction_pooler`](crate::PostgresStore::transaction_pooler)).
    pub transaction_pooler: bool,
    /// A direct PostgreSQL URL for push mode's `LISTEN`.
    pub notify_url: Option<String>,
    /// Replicas to read from (PostgreSQL, MariaDB).
    pub replica_urls: Vec<String>,
    /// How long a read waits for a replica to catch up.
    pub replica_wait: Duration,
    /// PostgreSQL and MariaDB: how long [`AnyStore::open`] looks for a host of the URL
    /// with the role it wants (a failover under way, a cluster starting) before it fails
    /// naming what each host was found to be. Zero: one search.
    pub primary_wait: Duration,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            push: None,
            transaction_pooler: false,
            notify_url: None,
            replica_urls: Vec::new(),
            #[cfg(any(feature = "postgres", feature = "mysql"))]
            replica_wait: crate::DEFAULT_REPLICA_WAIT,
            #[cfg(not(any(feature = "postgres", feature = "mysql")))]
            replica_wait: Duration::ZERO,
            primary_wait: Duration::ZERO,
        }
    }
}

/// A store of this crate's, as a URL names it.
#[derive(Debug, Clone)]
pub enum AnyStore {
    /// `sqlite:…`
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteStore),
    /// `postgres://…`, `postgresql://…`
    #[cfg(feature = "postgres")]
    Postgres(PostgresStore),
    /// `mysql://…`, `mariadb://…`
    #[cfg(feature = "mysql")]
    MySql(MySqlStore),
}

impl AnyStore {
    /// Opens and migrates the store `url` names, set up as `settings` say. Replicas need a
    /// PostgreSQL or MariaDB URL, the other settings a PostgreSQL one; push mode through a
    /// transaction pooler needs a direct URL for `LISTEN` (`notify_url`). Migrations go
    /// through `url`, a pooler's included, on the host of it that has the role the URL
    /// asks for (waiting for one at most `primary_wait`). Afterwards a server that goes
    /// down makes the store answer "unavailable" until it, or another host of the URL,
    /// is back.
    pub async fn open(url: &str, settings: &StoreSettings) -> Result<Self, Error> {
        let scheme = url.split_once(':').map_or(url, |(scheme, _)| scheme);
        let postgres = matches!(scheme, "postgres" | "postgresql");
        let networked = postgres || matches!(scheme, "mysql" | "mariadb");
        let refused = [
            (settings.push.is_some(), "push", postgres),
            (settings.transaction_pooler, "transaction_pooler", postgres),
            (settings.notify_url.is_some(), "notify_url", postgres),
            (!settings.replica_urls.is_empty(), "replica_urls", networked),
        ]
        .into_iter()
        .find_map(|(set, setting, allowed)| (set && !allowed).then_some(setting));
        if let Some(setting) = refused {
            return Err(Error::NotForThisDatabase(setting));
        }
        let store = match scheme {
            #[cfg(feature = "sqlite")]
            "sqlite" => Self::Sqlite(SqliteStore::connect(url).await?),
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => Self::Postgres(postgres_store(url, settings)?),
            #[cfg(feature = "mysql")]
            "mysql" | "mariadb" => Self::MySql(
                MySqlStore::connect_lazy(url)?
                    .with_replicas(replica_pools::<sqlx::MySql>(settings)?)
                    .replica_wait(settings.replica_wait),
            ),
            _ => return Err(Error::UnknownDatabase(url.to_owned())),
        };
        store.wait_for_primary(settings.primary_wait).await?;
        store.migrate().await?;
        #[cfg(feature = "postgres")]
        #[allow(irrefutable_let_patterns)] // the only variant without the other features
        if let Self::Postgres(postgres) = store {
            if let Some(on) = settings.push {
                postgres.set_push(on).await?;
            }
            let postgres = if settings.push == Some(true) {
                postgres.listening()
            } else {
                postgres
            };
            return Ok(Self::Postgres(postgres));
        }
        Ok(store)
    }

    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql")),
        allow(unused_variables)
    )]
    async fn wait_for_primary(&self, within: Duration) -> Result<(), Error> {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Self::Postgres(store) => store.wait_for_primary(within).await,
            #[cfg(feature = "mysql")]
            Self::MySql(store) => store.wait_for_primary(within).await,
        }
    }

    async fn migrate(&self) -> Result<(), Error> {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(store) => store.migrate().await,
            #[cfg(feature = "postgres")]
            Self::Postgres(store) => store.migrate().await,
            #[cfg(feature = "mysql")]
            Self::MySql(store) => store.migrate().await,
        }
    }

    /// The store's pools, for metrics ([`SqlStore::pools`](crate::SqlStore::pools)).
    pub fn pools(&self) -> Vec<PoolState> {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(store) => store.pools(),
            #[cfg(feature = "postgres")]
            Self::Postgres(store) => store.pools(),
            #[cfg(feature = "mysql")]
            Self::MySql(store) => store.pools(),
        }
    }
}

/// A PostgreSQL store as `settings` say, not migrated yet.
#[cfg(feature = "postgres")]
fn postgres_store(url: &str, settings: &StoreSettings) -> Result<PostgresStore, Error> {
    if settings.push == Some(true) && settings.transaction_pooler && settings.notify_url.is_none() {
        return Err(Error::PushNeedsDirectConnection);
    }
    let mut store = PostgresStore::connect_lazy(url)?
        .transaction_pooler(settings.transaction_pooler)
        .with_replicas(replica_pools::<sqlx::Postgres>(settings)?)
        .replica_wait(settings.replica_wait);
    if let Some(direct) = &settings.notify_url {
        store = store.notify_with(PostgresStore::options(direct)?);
    }
    Ok(store)
}

/// The pools of `settings`' replicas.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn replica_pools<DB: crate::servers::Networked>(
    settings: &StoreSettings,
) -> Result<Vec<sqlx::Pool<DB>>, Error> {
    settings
        .replica_urls
        .iter()
        .map(|url| crate::SqlStore::<DB>::replica_pool(url))
        .collect()
}
