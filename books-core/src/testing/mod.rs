//! Reusable suites (feature `testing`): every store and every binding runs the same cases.
//!
//! - [`store_conformance_suite!`](crate::store_conformance_suite) checks a
//!   [`BookStore`] against the storage contract, tier by tier (its authors seeded through
//!   its [`AuthorStore`], or a [`SeedAuthors`] of the host's).
//! - [`http_contract_suite!`](crate::http_contract_suite) checks the whole HTTP contract
//!   through any [`Harness`]: `handle()` in process, a framework binding, or real sockets.
//!
//! Each macro expands to one `#[tokio::test]` per case, so the caller needs `tokio`
//! (features `macros`, `rt-multi-thread`) among its dev-dependencies, beside
//! `books-core = { version = "…", features = ["testing"] }`. The module is always in the
//! documentation (a host's own `cargo doc` shows it) and compiled only with the feature.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;

use crate::api::BooksApi;
use crate::config::Config;
use crate::store::{AuthorStore, BookStore, Tiers};

mod counting_hook;
pub mod http_cases;
mod macros;
pub mod store_cases;
mod xml_tree;

pub use counting_hook::CountingHook;
pub use store_cases::{SeedAuthors, ThroughStore};
pub use xml_tree::XmlNode;

/// `body` as it was before `coding` (`gzip`, `br` or `zstd`, as the API compresses);
/// panics on any other coding or on bytes that do not decode.
pub fn decoded(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        "gzip" => flate2::read::GzDecoder::new(body)
            .read_to_end(&mut out)
            .map(drop),
        "br" => brotli::BrotliDecompress(&mut &body[..], &mut out),
        "zstd" => ruzstd::decoding::StreamingDecoder::new(&mut &body[..])
            .map_err(std::io::Error::other)
            .and_then(|mut decoder| decoder.read_to_end(&mut out))
            .map(drop),
        other => panic!("unexpected coding {other}"),
    }
    .expect("decodes");
    out
}

/// A way to reach one API instance, built by the suite from a [`Config`].
#[async_trait]
pub trait Harness: Send + Sync {
    /// Sends a request whose URI is a path and query (`/api/books?page=2`) and returns the
    /// response with its whole body.
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes>;

    /// Adds an author to the API's store and returns its id.
    async fn add_author(&self, name: Option<&str>) -> i64;

    /// Removes an author from the API's store (its books keep no author).
    async fn remove_author(&self, id: i64);

    /// The store tiers the API under test serves ([`BooksApi::tiers`]): cases that need a
    /// tier check the documented fallback without it. Every tier unless said otherwise
    /// (the strict choice: a harness that forgets this is held to the whole contract).
    fn tiers(&self) -> Tiers {
        Tiers::ALL
    }
}

/// The in-process harness: requests go straight to [`BooksApi::handle`].
#[derive(Clone)]
pub struct InProcess<S> {
    api: BooksApi,
    store: S,
    authors: Arc<dyn SeedAuthors<S>>,
}

impl<S> std::fmt::Debug for InProcess<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("api", &self.api)
            .finish_non_exhaustive()
    }
}

impl<S: BookStore + AuthorStore + Clone> InProcess<S> {
    /// An API over `store` configured by `config`; authors added through the store.
    pub fn new(store: S, config: Config) -> Self {
        Self::with_authors(store, ThroughStore, config)
    }
}

impl<S: BookStore + Clone> InProcess<S> {
    /// An API over `store` configured by `config`, its authors seeded by `authors` (for a
    /// store whose authors are read-only).
    pub fn with_authors(store: S, authors: impl SeedAuthors<S> + 'static, config: Config) -> Self {
        Self {
            api: BooksApi::new(store.clone(), config),
            store,
            authors: Arc::new(authors),
        }
    }

    /// The API under test.
    pub fn api(&self) -> &BooksApi {
        &self.api
    }

    /// The store under the API.
    pub fn store(&self) -> &S {
        &self.store
    }
}

#[async_trait]
impl<S: BookStore + Clone> Harness for InProcess<S> {
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.api.handle(request.map(Full::new)).await
    }

    async fn add_author(&self, name: Option<&str>) -> i64 {
        self.authors
            .add_author(&self.store, name)
            .await
            .expect("add author")
    }

    async fn remove_author(&self, id: i64) {
        self.authors
            .remove_author(&self.store, id)
            .await
            .expect("remove author");
    }

    fn tiers(&self) -> Tiers {
        self.api.tiers()
    }
}

/// Builds a harness for a configuration; implemented by every `Fn(Config) -> impl Future`.
pub trait MakeHarness: Send + Sync {
    /// The harness type.
    type Harness: Harness;
    /// Starts one API instance with `config`.
    fn make(&self, config: Config) -> impl Future<Output = Self::Harness> + Send;
}

impl<F, Fut, H> MakeHarness for F
where
    F: Fn(Config) -> Fut + Send + Sync,
    Fut: Future<Output = H> + Send,
    H: Harness,
{
    type Harness = H;
    fn make(&self, config: Config) -> impl Future<Output = H> + Send {
        self(config)
    }
}
