//! Framework-free core of the books API.
//!
//! [`BooksApi`] implements every route of the books-and-ping contract over
//! [`http::Request`](https://docs.rs/http/1/http/request/struct.Request.html) and
//! [`http::Response`](https://docs.rs/http/1/http/response/struct.Response.html): routing (index and action schemes),
//! `Accept` negotiation (JSON and XML), body decoding (form, JSON, multipart),
//! validation, pagination and RFC 9457 problem details. Storage sits behind the
//! object-safe [`BookStore`] trait; bindings (warp, …) only convert types.
//!
//! [`BooksApi`] is also a tower `Service` (for hyper, axum, tonic …), and
//! [`BooksApi::layer`] a tower `Layer` ([`MountLayer`]) that mounts it in front of a
//! host's own service.
//!
//! ```
//! use books_core::{BooksApi, Config};
//! # #[derive(Debug)] struct NoStore;
//! # #[async_trait::async_trait]
//! # impl books_core::BookStore for NoStore {
//! #   async fn list(&self, _: u64, _: u32) -> Result<books_core::BookPage, books_core::StoreError> { Ok(Default::default()) }
//! #   async fn get(&self, _: i64) -> Result<Option<books_core::BookRecord>, books_core::StoreError> { Ok(None) }
//! #   async fn create(&self, _: &books_core::BookInput, _: chrono::DateTime<chrono::Utc>) -> Result<books_core::BookRecord, books_core::StoreError> { Err(books_core::StoreError::AuthorNotFound(0)) }
//! #   async fn update(&self, _: i64, _: &books_core::BookInput, _: chrono::DateTime<chrono::Utc>) -> Result<Option<books_core::BookRecord>, books_core::StoreError> { Ok(None) }
//! #   async fn delete(&self, _: i64) -> Result<bool, books_core::StoreError> { Ok(false) }
//! #   async fn author_exists(&self, _: i64) -> Result<bool, books_core::StoreError> { Ok(false) }
//! #   async fn update_if(&self, _: i64, _: &books_core::BookInput, _: chrono::DateTime<chrono::Utc>, _: books_core::Precondition<'_>) -> Result<books_core::Guarded<Option<books_core::BookRecord>>, books_core::StoreError> { Ok(books_core::Guarded::Done(None)) }
//! #   async fn delete_if(&self, _: i64, _: books_core::Precondition<'_>) -> Result<books_core::Guarded<bool>, books_core::StoreError> { Ok(books_core::Guarded::Done(false)) }
//! #   async fn create_keyed(&self, _: &books_core::BookInput, _: chrono::DateTime<chrono::Utc>, _: &books_core::IdempotencyKey) -> Result<books_core::KeyedCreate, books_core::StoreError> { Err(books_core::StoreError::AuthorNotFound(0)) }
//! #   async fn idempotency_record(&self, _: &str, _: chrono::DateTime<chrono::Utc>) -> Result<Option<books_core::IdempotencyRecord>, books_core::StoreError> { Ok(None) }
//! #   async fn forget_expired_keys(&self, _: chrono::DateTime<chrono::Utc>, _: u32) -> Result<u64, books_core::StoreError> { Ok(0) }
//! # }
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let api = BooksApi::new(NoStore, Config::default().with_extended_ping(false));
//! let request = http::Request::get("/api/ping").body(String::new()).unwrap();
//! assert!(api.owns(request.uri().path()));
//! let response = api.handle(request).await;
//! assert_eq!(response.status(), 200);
//! assert_eq!(&response.body()[..], br#"{"status":"ok"}"#);
//! # });
//! ```

mod api;
mod body;
mod cache;
mod compression;
mod conditional;
mod config;
pub mod demo;
mod fields;
mod form;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod idempotency;
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
mod store;
mod validate;
mod xml;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use api::BooksApi;
pub use cache::CacheLimits;
pub use config::{Clock, Config, ManualClock, RouteScheme, SystemClock};
pub use request_id::{REQUEST_ID, RequestId};
pub use service::{ApiFuture, Mount, MountBody, MountLayer, Nested};
pub use store::{
    Answer, AuthorStore, BookInput, BookPage, BookRecord, BookStore, BooksTally, Guarded,
    IdempotencyKey, IdempotencyRecord, KeyedCreate, Precondition, StoreError, StoredAnswer,
    VersionReading,
};

/// The version reported by the extended ping.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
