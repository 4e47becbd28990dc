//! Opening the store a database URL names.

use std::sync::Arc;

use books_core::{AuthorStore, BookStore};
use books_memstore::MemStore;
use books_sqlx::sqlx::Pool;
use books_sqlx::{PostgresStore, SqliteStore};
use metrics::gauge;

use crate::Error;

/// A store the server can serve, fill with demo data and report the pools of.
pub trait DemoStore: BookStore + AuthorStore {
    /// Sets the `books_db_pool_connections{pool, state}` gauges (`state`: `idle`,
    /// `in_use`) and `books_db_pool_max_connections{pool}`; nothing for pool-less stores.
    fn record_pool_metrics(&self) {}
}

impl DemoStore for MemStore {}

impl DemoStore for SqliteStore {
    fn record_pool_metrics(&self) {
        record_pool("sqlite_readers", self.readers());
        record_pool("sqlite_writer", self.writer());
    }
}

impl DemoStore for PostgresStore {
    fn record_pool_metrics(&self) {
        record_pool("postgres", self.pool());
    }
}

fn record_pool<DB: books_sqlx::sqlx::Database>(name: &'static str, pool: &Pool<DB>) {
    let size = pool.size();
    let idle = u32::try_from(pool.num_idle()).unwrap_or(size);
    let max = pool.options().get_max_connections();
    gauge!("books_db_pool_connections", "pool" => name, "state" => "idle").set(idle);
    gauge!("books_db_pool_connections", "pool" => name, "state" => "in_use")
        .set(size.saturating_sub(idle));
    gauge!("books_db_pool_max_connections", "pool" => name).set(max);
}

/// Opens and migrates the store for `url`: `memory`, `sqlite:…` or `postgres://…`.
/// `push` turns PostgreSQL's push mode on or off for the database
/// ([`PostgresStore::set_push`]); on, this store also listens
/// ([`PostgresStore::listening`]). The other stores have no push mode.
pub async fn open_store(url: &str, push: Option<bool>) -> Result<Arc<dyn DemoStore>, Error> {
    let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if push.is_some() && !postgres {
        return Err(Error::PushNeedsPostgres);
    }
    if url == "memory" {
        return Ok(Arc::new(MemStore::new()));
    }
    if url.starts_with("sqlite:") {
        let store = SqliteStore::connect(url).await?;
        store.migrate().await?;
        return Ok(Arc::new(store));
    }
    if postgres {
        let store = PostgresStore::connect_lazy(url)?;
        store.migrate().await?;
        if let Some(on) = push {
            store.set_push(on).await?;
        }
        if push == Some(true) {
            return Ok(Arc::new(store.listening()));
        }
        return Ok(Arc::new(store));
    }
    Err(Error::UnknownDatabase(url.to_owned()))
}
