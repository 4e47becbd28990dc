//! warp binding for the books API: [`routes`] turns a [`BooksApi`] into a `Filter`.
//!
//! Requests under the API's mount prefix are answered by the core, every one of them:
//! no warp rejection ever comes out from inside the prefix. Every other path is
//! rejected as "not found", so a host's own filters combined with `.or()` still
//! answer them.
//!
//! ```
//! use books_core::{BooksApi, Config};
//! use books_memstore::MemStore;
//! use warp::Filter;
//!
//! let api = BooksApi::new(MemStore::new(), Config::default());
//! let health = warp::path!("health").map(|| "up");
//! let app = books_warp::routes(api).or(health);
//! # let _ = app;
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

/// The crate's README (what crates.io shows), its examples compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use books_core::BooksApi;
use bytes::{Buf, Bytes};
use futures_util::{Stream, TryStreamExt};
use http::{HeaderMap, Method, Request, Response, Uri};
use http_body::Frame;
use http_body_util::StreamBody;
use warp::filters::path::FullPath;
use warp::{Filter, Rejection};

/// A filter answering every request under `api`'s prefix with the core's response and
/// rejecting (not found) every other path. Bodies stream into the core, which stops
/// reading at the configured limit (413).
pub fn routes(
    api: BooksApi,
) -> impl Filter<Extract = (Response<Bytes>,), Error = Rejection> + Clone + Send + Sync + 'static {
    // warp 0.4's `path::full` (like `tail` and `peek`) panics on a target with no path:
    // the authority form (`CONNECT host:port`), which hyper accepts with any method.
    // `path::end` reads the path safely; when nothing is left of it, it is taken as "/"
    // without asking `full`, which covers the authority form and "/" itself.
    let path = warp::path::end()
        .map(|| None)
        .or(warp::path::full().map(Some))
        .unify();
    let owned = {
        let api = api.clone();
        path.and_then(move |path: Option<FullPath>| {
            let owned = api.owns(path.as_ref().map_or("/", FullPath::as_str));
            async move {
                if owned {
                    Ok(path)
                } else {
                    Err(warp::reject::not_found())
                }
            }
        })
    };
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    owned
        .and(query)
        .and(warp::method())
        .and(warp::header::headers_cloned())
        .and(warp::body::stream())
        .then(move |path, query, method, headers, body| {
            // Boxed: the core's future is large, and warp and hyper would move it whole
            // several times per request; one allocation costs less (BENCHMARKS.md).
            Box::pin(api.handle(request(path, query, method, headers, body)))
        })
}

/// Rebuilds the `http::Request` warp took apart; the body stays a stream.
fn request<S, B>(
    path: Option<FullPath>,
    query: String,
    method: Method,
    headers: HeaderMap,
    body: S,
) -> Request<StreamBody<impl Stream<Item = Result<Frame<Bytes>, warp::Error>>>>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    let path = path.as_ref().map_or("/", FullPath::as_str);
    let mut uri = String::with_capacity(path.len() + 1 + query.len());
    uri.push_str(path);
    if !query.is_empty() {
        uri.push('?');
        uri.push_str(&query);
    }
    let frames = body.map_ok(|mut chunk| Frame::data(chunk.copy_to_bytes(chunk.remaining())));
    let mut request = Request::new(StreamBody::new(frames));
    *request.method_mut() = method;
    // warp parsed this URI already; re-parsing its own parts cannot fail.
    *request.uri_mut() = Uri::try_from(uri).unwrap_or_default();
    *request.headers_mut() = headers;
    request
}
