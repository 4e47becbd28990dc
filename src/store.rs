//! Opening the store a database URL names.

use std::sync::Arc;

use books_core::{AuthorStore, BookStore};
use books_memstore::MemStore;
use books_sqlx::{PostgresStore, SqliteStore};

use crate::Error;

/// A store the server can serve and fill with demo data.
pub trait DemoStore: BookStore + AuthorStore {}
impl<S: BookStore + AuthorStore> DemoStore for S {}

/// Opens and migrates the store for `url`: `memory`, `sqlite:…` or `postgres://…`.
pub async fn open_store(url: &str) -> Result<Arc<dyn DemoStore>, Error> {
    if url == "memory" {
        return Ok(Arc::new(MemStore::new()));
    }
    if url.starts_with("sqlite:") {
        let store = SqliteStore::connect(url).await?;
        store.migrate().await?;
        return Ok(Arc::new(store));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PostgresStore::connect_lazy(url)?;
        store.migrate().await?;
        return Ok(Arc::new(store));
    }
    Err(Error::UnknownDatabase(url.to_owned()))
}
