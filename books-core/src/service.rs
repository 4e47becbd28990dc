//! tower: [`BooksApi`] is a `Service`, and [`MountLayer`] mounts it beside a host's own
//! service (the tower form of warp's `.or()`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::{self, FutureExt, TryFutureExt};
use http::uri::PathAndQuery;
use http::{Request, Response, Uri};
use http_body::Body;
use http_body_util::{Either, Full};
use tower_service::Service;

use crate::api::BooksApi;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The future of one answer of [`BooksApi`] as a tower `Service`.
pub type ApiFuture =
    Pin<Box<dyn Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send>>;

/// Answers every request it is given, with its whole path, as [`BooksApi::handle`] does
/// (a path outside the prefix gets the API's 404): for hyper alone and for routers that
/// pass the path on as it came (axum's `route_service("/api/{*rest}", …)` and
/// `fallback_service`). A router that strips the mount path first (axum's
/// `nest_service`) mounts [`BooksApi::nested`] instead, and one that should answer only
/// the prefix and hand everything else to the host's service mounts [`MountLayer`].
impl<B> Service<Request<B>> for BooksApi
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> ApiFuture {
        answer(self, request)
    }
}

/// [`BooksApi`] for a router that strips the mount path before calling the service
/// (axum's `nest_service("/api", api.nested())`): every path it is given is relative to
/// the prefix (`/books/7` is `/api/books/7`), so a request for `/api/api/books`, which
/// the router hands on as `/api/books`, is the API's 404 and not a book list. Links and
/// `Location` carry the configured prefix: nest it where the prefix says.
#[derive(Debug, Clone)]
pub struct NestedService {
    api: BooksApi,
}

impl<B> Service<Request<B>> for NestedService
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<B>) -> ApiFuture {
        *request.uri_mut() = self.api.under_prefix(request.uri());
        answer(&self.api, request)
    }
}

fn answer<B>(api: &BooksApi, request: Request<B>) -> ApiFuture
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    Box::pin(
        api.handle(request)
            .map(|response| Ok(response.map(Full::new))),
    )
}

impl BooksApi {
    /// A [`MountLayer`] for this API: `api.layer().layer(host_service)`.
    pub fn layer(&self) -> MountLayer {
        MountLayer { api: self.clone() }
    }

    /// This API as a service for a router that strips the mount path ([`NestedService`]).
    pub fn nested(&self) -> NestedService {
        NestedService { api: self.clone() }
    }

    /// `uri` with the prefix put before its path (a router stripped it).
    fn under_prefix(&self, uri: &Uri) -> Uri {
        let path = uri.path_and_query().map_or("", PathAndQuery::as_str);
        let joined = format!("{}{path}", self.config().prefix());
        // The prefix is a normalised path and `path` a parsed one: joined, they parse.
        joined.parse().unwrap_or_else(|_| Uri::from_static("/"))
    }
}

/// A tower `Layer` that mounts a [`BooksApi`] in front of a host's service: requests whose
/// path lies under the API's prefix are answered by the API, every other request goes to
/// the inner service untouched.
#[derive(Debug, Clone)]
pub struct MountLayer {
    api: BooksApi,
}

impl MountLayer {
    /// A layer mounting `api`.
    pub fn new(api: BooksApi) -> Self {
        Self { api }
    }
}

impl<S> tower_layer::Layer<S> for MountLayer {
    type Service = MountService<S>;

    fn layer(&self, inner: S) -> MountService<S> {
        MountService {
            api: self.api.clone(),
            inner,
        }
    }
}

/// The service [`MountLayer`] builds: the API under its prefix, `S` everywhere else.
///
/// Readiness is the inner service's, as with any router in front of one service.
#[derive(Debug, Clone)]
pub struct MountService<S> {
    api: BooksApi,
    inner: S,
}

/// The response body of a [`MountService`]: the API's own, or the inner service's.
pub type MountBody<B> = Either<Full<Bytes>, B>;

type ApiAnswer<R, E> = fn(Result<Response<Full<Bytes>>, Infallible>) -> Result<Response<R>, E>;
type InnerAnswer<B> = fn(Response<B>) -> Response<MountBody<B>>;

impl<S, B, ResBody> Service<Request<B>> for MountService<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<MountBody<ResBody>>;
    type Error = S::Error;
    type Future = future::Either<
        future::Map<ApiFuture, ApiAnswer<MountBody<ResBody>, S::Error>>,
        future::MapOk<S::Future, InnerAnswer<ResBody>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if self.api.owns(request.uri().path()) {
            let api_answer: ApiAnswer<MountBody<ResBody>, S::Error> = |answered| {
                let Ok(response) = answered;
                Ok(response.map(Either::Left))
            };
            future::Either::Left(answer(&self.api, request).map(api_answer))
        } else {
            let inner_answer: InnerAnswer<ResBody> = |response| response.map(Either::Right);
            future::Either::Right(self.inner.call(request).map_ok(inner_answer))
        }
    }
}
