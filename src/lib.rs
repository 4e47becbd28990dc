//! The books API server: books-hyper's serve loop (re-exported here: [`serve`],
//! [`Limits`], [`ClientPolicy`], [`Operations`] …) over the store a URL names
//! ([`Store`]), configured by the command line ([`Options`]), with a Prometheus exporter
//! ([`install_metrics`]) and OTLP trace export ([`Traces`]). The binary (`cargo run --release`) puts them together; the
//! repository's README covers running, embedding and configuring it.

/// The README's examples, compiled and run as doc tests (kept out of the rendered docs,
/// where its links to files beside it would not resolve).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// `docs/embedding.md`'s examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/embedding.md")]
pub struct EmbeddingDoctests;

/// `docs/stores.md`'s examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/stores.md")]
pub struct StoresDoctests;

mod metrics;
mod options;
mod store;
mod telemetry;

pub use books_hyper::{
    ClientPolicy, Cors, InvalidOrigin, LIVEZ, Limits, METRICS, Operations, RATELIMIT,
    RATELIMIT_POLICY, READYZ, RateLimit, RenderMetrics, serve, serve_metrics, serve_with,
};
pub use metrics::install_metrics;
pub use options::{LogFormat, Options};
pub use store::Store;
pub use telemetry::{SPANS_DROPPED, TraceError, Traces};

use std::net::SocketAddr;
use std::pin::Pin;

use books_core::BooksApi;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database URL names no store this server knows.
    #[error(
        "unsupported database URL {0:?} (expected sqlite:…, postgres://…, mysql://…, or memory)"
    )]
    UnknownDatabase(String),
    /// A flag for another database (push mode, a pooler and `--notify-url` are
    /// PostgreSQL's; replicas PostgreSQL's and MariaDB's).
    #[error("{0} does not apply to this database")]
    NotForThisDatabase(&'static str),
    /// `--push true` through a transaction pooler without a direct URL to listen on.
    #[error(
        "push mode listens for the database's notifications, which a transaction pooler \
         does not pass on: give a direct PostgreSQL URL to listen on (--notify-url)"
    )]
    PushNeedsNotifyUrl,
    /// A `--cors-origin` that is no origin.
    #[error(transparent)]
    Cors(#[from] InvalidOrigin),
    /// The database URL or its settings, connecting or migrating.
    #[error(transparent)]
    Database(#[from] books_sqlx::Error),
    /// Loading the demo data failed.
    #[error("loading demo data failed")]
    Demo(#[from] books_core::StoreError),
    /// Setting up the Prometheus exporter failed.
    #[error("setting up metrics failed")]
    Metrics(#[from] metrics_exporter_prometheus::BuildError),
    /// Setting up trace export failed (an unsupported `OTEL_EXPORTER_OTLP_PROTOCOL`, an
    /// endpoint that is no URL).
    #[error(transparent)]
    Traces(#[from] TraceError),
    /// Binding the listen address or serving failed.
    #[error("listening failed")]
    Io(#[from] std::io::Error),
}

/// Opens the store `options` name, migrates it, loads the demo data into an empty one,
/// and builds the API for a server listening on `local`; the store comes back too (for
/// its pool metrics).
///
/// The future is boxed here, so that the stores' code it runs is compiled in this crate
/// and not again in the binary's (the first build's last step; `cargo build --timings`).
pub fn build_api(options: &Options, local: SocketAddr) -> Building<'_> {
    Box::pin(open_and_build(options, local))
}

/// The future [`build_api`] returns.
pub type Building<'a> = Pin<Box<dyn Future<Output = Result<(BooksApi, Store), Error>> + Send + 'a>>;

/// [`build_api`]'s work.
async fn open_and_build(options: &Options, local: SocketAddr) -> Result<(BooksApi, Store), Error> {
    let store = Store::open(&options.database_url, &options.store_settings()).await?;
    let config = options.config(local);
    if store.load_demo_if_empty(config.now()).await? {
        tracing::info!("loaded demo data into the empty database");
    }
    Ok((store.api(config), store))
}
