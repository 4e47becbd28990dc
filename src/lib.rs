#![doc = include_str!("../README.md")]

mod options;
mod serve;
mod store;

pub use options::{LogFormat, Options};
pub use serve::{Limits, serve};
pub use store::{DemoStore, open_store};

use std::net::SocketAddr;

use books_core::BooksApi;

/// Why the example server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database URL names no store this server knows.
    #[error("unsupported database URL {0:?} (expected sqlite:…, postgres://…, or memory)")]
    UnknownDatabase(String),
    /// Connecting or migrating failed.
    #[error(transparent)]
    Database(#[from] books_sqlx::Error),
    /// Loading the demo data failed.
    #[error("loading demo data failed: {0}")]
    Demo(#[from] books_core::StoreError),
    /// Binding the listen address or serving failed.
    #[error("network error: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the store `options` name, migrates it, loads the demo data into an empty one,
/// and builds the API for a server listening on `local`.
pub async fn build_api(options: &Options, local: SocketAddr) -> Result<BooksApi, Error> {
    let store = open_store(&options.database_url).await?;
    let config = options.config(local);
    if books_core::demo::load_if_empty(&*store, config.now()).await? {
        tracing::info!("loaded demo data into the empty database");
    }
    Ok(BooksApi::from_arc(store, config))
}
