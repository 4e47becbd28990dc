//! Opening the store a database URL names.

use std::sync::Arc;

use books_core::store::{AuthorStore, BookStore};
use books_memstore::MemStore;
use books_sqlx::sqlx::Pool;
use books_sqlx::{MySqlStore, PostgresStore, SqliteStore};
use metrics::gauge;

use crate::Error;

/// A store the server can serve, fill with demo data and report the pools of.
pub trait ServerStore: BookStore + AuthorStore {
    /// Sets the `books_db_pool_connections{pool, state}` gauges (`state`: `idle`,
    /// `in_use`) and `books_db_pool_max_connections{pool}`; nothing for pool-less stores.
    fn record_pool_metrics(&self) {}
}

impl ServerStore for MemStore {}

impl ServerStore for SqliteStore {
    fn record_pool_metrics(&self) {
        record_pool("sqlite_readers".into(), self.readers());
        record_pool("sqlite_writer".into(), self.writer());
    }
}

impl ServerStore for PostgresStore {
    fn record_pool_metrics(&self) {
        record_pool("postgres".into(), self.pool());
        for (pool, state) in self.replica_pools().iter().zip(self.replicas()) {
            record_pool(format!("postgres_replica:{}", state.replica), pool);
        }
    }
}

fn record_pool<DB: books_sqlx::sqlx::Database>(name: String, pool: &Pool<DB>) {
    let size = pool.size();
    let idle = u32::try_from(pool.num_idle()).unwrap_or(size);
    let max = pool.options().get_max_connections();
    gauge!("books_db_pool_connections", "pool" => name.clone(), "state" => "idle").set(idle);
    gauge!("books_db_pool_connections", "pool" => name.clone(), "state" => "in_use")
        .set(size.saturating_sub(idle));
    gauge!("books_db_pool_max_connections", "pool" => name).set(max);
}

impl ServerStore for MySqlStore {
    fn record_pool_metrics(&self) {
        record_pool("mysql".into(), self.pool());
        for (pool, state) in self.replica_pools().iter().zip(self.replicas()) {
            record_pool(format!("mysql_replica:{}", state.replica), pool);
        }
    }
}

/// The database settings of the server's [`Options`](crate::Options): which store, and
/// for PostgreSQL and MariaDB how they are reached.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct StoreOptions {
    /// `memory`, `sqlite:…`, `postgres://…`, or `mysql://…` (`mariadb://…`).
    pub database_url: String,
    /// PostgreSQL's push mode: `Some(true)` turns it on for the database
    /// ([`PostgresStore::set_push`]) and listens ([`PostgresStore::listening`]),
    /// `Some(false)` turns it off, `None` leaves the database alone.
    pub push: Option<bool>,
    /// The database URL is a transaction-mode pooler's
    /// ([`PostgresStore::transaction_pooler`]).
    pub transaction_pooler: bool,
    /// A direct PostgreSQL URL for push mode's `LISTEN` ([`PostgresStore::notify_with`]).
    pub notify_url: Option<String>,
    /// Replicas to read from ([`PostgresStore::with_replicas`],
    /// [`MySqlStore::with_replicas`]).
    pub replica_urls: Vec<String>,
    /// How long a read waits for a replica to catch up ([`PostgresStore::replica_wait`]).
    pub replica_wait: std::time::Duration,
}

impl StoreOptions {
    /// The store at `database_url`, with the defaults for everything else.
    pub fn new(database_url: &str) -> Self {
        Self {
            database_url: database_url.to_owned(),
            replica_wait: books_sqlx::DEFAULT_REPLICA_WAIT,
            ..Self::default()
        }
    }
}

/// Opens and migrates the store `options` name. Replicas need a `postgres://` or
/// `mysql://` URL, the other PostgreSQL settings a `postgres://` one; push mode through a
/// transaction pooler needs a direct URL for `LISTEN` (`notify_url`). Migrations go
/// through the database URL, a pooler's included.
pub async fn open_store(options: &StoreOptions) -> Result<Arc<dyn ServerStore>, Error> {
    let url = options.database_url.as_str();
    let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let mysql = url.starts_with("mysql://") || url.starts_with("mariadb://");
    let flag = [
        (options.push.is_some(), "--push", postgres),
        (options.transaction_pooler, "--transaction-pooler", postgres),
        (options.notify_url.is_some(), "--notify-url", postgres),
        (
            !options.replica_urls.is_empty(),
            "--replica-url",
            postgres || mysql,
        ),
    ]
    .into_iter()
    .find_map(|(set, flag, allowed)| (set && !allowed).then_some(flag));
    if let Some(flag) = flag {
        return Err(Error::NotForThisDatabase(flag));
    }
    if mysql {
        let replicas = options
            .replica_urls
            .iter()
            .map(|url| MySqlStore::replica_pool(url))
            .collect::<Result<_, _>>()?;
        let store = MySqlStore::connect_lazy(url)?
            .with_replicas(replicas)
            .replica_wait(options.replica_wait);
        store.migrate().await?;
        return Ok(Arc::new(store));
    }
    if url == "memory" {
        return Ok(Arc::new(MemStore::new()));
    }
    if url.starts_with("sqlite:") {
        let store = SqliteStore::connect(url).await?;
        store.migrate().await?;
        return Ok(Arc::new(store));
    }
    if !postgres {
        return Err(Error::UnknownDatabase(url.to_owned()));
    }
    if options.push == Some(true) && options.transaction_pooler && options.notify_url.is_none() {
        return Err(Error::PushNeedsDirectConnection);
    }
    let replicas = options
        .replica_urls
        .iter()
        .map(|url| PostgresStore::replica_pool(url))
        .collect::<Result<_, _>>()?;
    let mut store = PostgresStore::connect_lazy(url)?
        .transaction_pooler(options.transaction_pooler)
        .with_replicas(replicas)
        .replica_wait(options.replica_wait);
    if let Some(direct) = &options.notify_url {
        store = store.notify_with(PostgresStore::options(direct)?);
    }
    store.migrate().await?;
    if let Some(on) = options.push {
        store.set_push(on).await?;
    }
    if options.push == Some(true) {
        return Ok(Arc::new(store.listening()));
    }
    Ok(Arc::new(store))
}
