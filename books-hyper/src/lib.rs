//! The books API's production serve loop on hyper, for a host that wants it beside (or
//! instead of) its own: HTTP/1.1 and HTTP/2 (prior knowledge) with timeouts, request ids
//! and graceful shutdown ([`serve`], [`serve_with`], [`Limits`]), load shedding past a
//! bound on requests in flight, CORS ([`Cors`]) and per-client rate limits
//! ([`RateLimit`]), together the [`ClientPolicy`], and the operator endpoints
//! ([`Operations`]: `/livez`, `/readyz`, `/metrics` through a renderer the host gives),
//! and with the feature `opentelemetry`, callers' W3C trace context continued
//! (`ClientPolicy::trace_context`).
//! No database driver and no command line: the store is the host's, the `BooksApi`
//! over it the host's.
//!
//! ```no_run
//! # async fn run(api: books_core::BooksApi) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let shutdown = async { tokio::signal::ctrl_c().await.ok(); };
//! books_hyper::serve(listener, api, books_hyper::Limits::default(), shutdown).await
//! # }
//! ```

/// The crate's README (what crates.io shows), its example compiled as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod cors;
mod handler;
mod ops;
mod rate_limit;
mod response;
mod serve;
#[cfg(feature = "opentelemetry")]
mod trace_context;

pub use cors::{Cors, InvalidOrigin};
pub use ops::{LIVEZ, METRICS, Operations, READYZ, RenderMetrics, serve_metrics};
pub use rate_limit::{RATELIMIT, RATELIMIT_POLICY, RateLimit};
pub use serve::{ClientPolicy, Limits, Serving, serve, serve_with};
