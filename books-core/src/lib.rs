//! Framework-free core of the books API.
//!
//! [`BooksApi`] implements every route of the books-and-ping contract over
//! [`http::Request`](https://docs.rs/http/1/http/request/struct.Request.html) and
//! [`http::Response`](https://docs.rs/http/1/http/response/struct.Response.html): routing (index and action schemes),
//! `Accept` negotiation (JSON and XML), body decoding (form, JSON, multipart),
//! validation, pagination, conditional requests, compression and RFC 9457 problem
//! details. Storage sits behind the traits of the [`store`] module, in tiers: a data
//! tier every store implements, and capabilities beside it. Bindings only convert types.
//!
//! [`BooksApi`] is also a tower `Service` (for hyper, axum, tonic …), and
//! [`BooksApi::layer`] a tower `Layer` ([`MountLayer`]) that mounts it in front of a
//! host's own service.
//!
//! ```
//! use books_core::{BooksApi, Config};
//! # use books_core::store::*;
//! # #[derive(Debug)] struct NoStore;
//! # #[async_trait::async_trait]
//! # impl BookStore for NoStore {
//! #   async fn list(&self, _: &ListQuery) -> Result<BookPage, StoreError> { Ok(Default::default()) }
//! #   async fn get(&self, _: i64) -> Result<Option<BookRecord>, StoreError> { Ok(None) }
//! #   async fn create(&self, _: &BookInput, _: chrono::DateTime<chrono::Utc>) -> Result<BookRecord, StoreError> { Err(StoreError::AuthorNotFound(0)) }
//! #   async fn update(&self, _: i64, _: &BookInput, _: chrono::DateTime<chrono::Utc>) -> Result<Option<BookRecord>, StoreError> { Ok(None) }
//! #   async fn delete(&self, _: i64) -> Result<bool, StoreError> { Ok(false) }
//! #   async fn author_exists(&self, _: i64) -> Result<bool, StoreError> { Ok(false) }
//! #   fn capabilities(self: std::sync::Arc<Self>) -> Capabilities<Self> { Capabilities::of(self) }
//! # }
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let api = BooksApi::new(NoStore, Config::default());
//! let request = http::Request::get("/api/ping").body(String::new()).unwrap();
//! assert!(api.owns(request.uri().path()));
//! let response = api.handle(request).await;
//! assert_eq!(response.status(), 200);
//! assert_eq!(&response.body()[..], br#"{"status":"ok"}"#);
//! # });
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod api;
mod body;
mod cache;
mod clock;
mod compression;
mod conditional;
mod config;
pub mod demo;
#[cfg(feature = "docs-page")]
mod docs_page;
mod etag;
mod fields;
mod form;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod idempotency;
mod list_params;
mod log_throttle;
pub mod metrics;
mod negotiate;
mod openapi;
mod pagination;
mod problem;
mod query;
mod render;
mod request_id;
mod route;
mod service;
mod stamp;
pub mod store;
pub mod trace;
mod validate;
mod xml;

// Documented always (`doc`), so that a host's `cargo doc` shows the suites it tests
// with; compiled for use with the feature only.
#[cfg(any(feature = "testing", doc))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use api::{BooksApi, VERSION};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{CacheControl, CacheLimits, Config, RouteScheme};
pub use log_throttle::LogThrottle;
pub use problem::ErrorChain;
pub use render::refusal;
pub use request_id::{REQUEST_ID, RequestId};
pub use service::{ApiFuture, MountBody, MountLayer, MountService, NestedService};
pub use store::{BookStore, StoreError};
