//! [`BooksApi`]: the entry point a binding hands requests to.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CACHE_CONTROL, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use tracing::Instrument;

use crate::cache::{Cache, VersionSource};
use crate::compression;
use crate::conditional;
use crate::config::Config;
use crate::idempotency::InFlight;
use crate::log_throttle::LogThrottle;
use crate::metrics::{RequestTimer, untraced_store_call};
use crate::negotiate::{Format, negotiate};
use crate::problem::{ErrorChain, Problem};
use crate::query;
use crate::render;
use crate::request_id::RequestId;
use crate::route::{Endpoint, Routed, route};
use crate::stamp;
use crate::store::{BookStore, StoreError, StoreTiers, Tiers, UndeclaredTiers};
use crate::trace::{self, UNMATCHED};

mod reads;
mod writes;

/// The version reported by the extended ping.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The books API over one store and one configuration. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct BooksApi {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The store and its tiers, settled when the API was built.
    store: StoreTiers,
    config: Config,
    /// The OpenAPI document as served, made on its first request (making it parses and
    /// writes the whole document: most of what building an API cost, BENCHMARKS.md).
    openapi: OnceLock<Bytes>,
    /// Rendered answers (for a store with versions) and compressed bodies, when the
    /// configuration caches.
    cache: Option<Cache>,
    /// `Cache-Control` of book and page answers.
    cache_control: HeaderValue,
    /// Idempotency keys whose creates this process is answering.
    in_flight: InFlight,
    /// When expired idempotency keys were last forgotten (seconds since the epoch).
    forgotten_at: AtomicI64,
    /// The last ping answer of each format (JSON, XML).
    pings: Mutex<[Option<RenderedPing>; 2]>,
}

type Handled = Result<Response<Bytes>, Problem>;

/// A ping answer and the second it was rendered in.
type RenderedPing = (i64, Response<Bytes>);

impl BooksApi {
    /// An API serving `store` as `config` says, with the tiers its
    /// [`capabilities`](BookStore::capabilities) name.
    pub fn new(store: impl BookStore, config: Config) -> Self {
        Self::from_arc(Arc::new(store), config)
    }

    /// [`new`](Self::new), refusing a store whose
    /// [`capabilities`](BookStore::capabilities) name fewer tiers than `implemented`, the
    /// tier traits its type implements: [`checked_api!`](crate::checked_api) passes them.
    pub fn try_new<S: BookStore>(
        store: S,
        config: Config,
        implemented: Tiers,
    ) -> Result<Self, UndeclaredTiers> {
        let store = Arc::new(store).capabilities().settled();
        let missing = implemented.missing_from(&store.names());
        if !missing.is_empty() {
            let store = std::any::type_name::<S>();
            return Err(UndeclaredTiers { store, missing });
        }
        Ok(Self::settled(store, config))
    }

    /// An API over a store that is already shared.
    pub fn from_arc<S: BookStore>(store: Arc<S>, config: Config) -> Self {
        Self::settled(store.capabilities().settled(), config)
    }

    fn settled(store: StoreTiers, config: Config) -> Self {
        let source = store.versions.clone().map(|versions| VersionSource {
            versions,
            tally: store.tally.clone(),
        });
        let cache = config.cache().map(|limits| Cache::new(limits, source));
        Self {
            inner: Arc::new(Inner {
                store,
                cache_control: config.cache_control().header_value(),
                config,
                openapi: OnceLock::new(),
                cache,
                in_flight: InFlight::default(),
                forgotten_at: AtomicI64::new(0),
                pings: Mutex::default(),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The capability tiers of the store, which decide what the API serves: without
    /// versions nothing is cached, without conditional writes `If-Match` gets 501, without
    /// idempotent creates `Idempotency-Key` gets 501 (see [`crate::store`]).
    pub fn tiers(&self) -> Tiers {
        self.inner.store.names()
    }

    /// Whether `path` lies under the mount prefix. A binding hands every other path
    /// back to its host (in warp: a rejection).
    pub fn owns(&self, path: &str) -> bool {
        self.relative(path).is_some()
    }

    /// The methods the route table serves at `path` as an `Allow` value (`GET, HEAD,
    /// OPTIONS` …), `None` where no route matches: what a CORS preflight for the path
    /// may be allowed.
    pub fn allow(&self, path: &str) -> Option<HeaderValue> {
        let path = self.relative(path)?;
        match route(path, &Method::OPTIONS, &self.inner.config).0 {
            Routed::Options(allow) => Some(allow.header()),
            _ => None,
        }
    }

    fn relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.inner.config.prefix())?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }

    /// Answers one request. Never panics on client input; a path outside the prefix
    /// gets the API's own 404 (check [`owns`](Self::owns) first to route it elsewhere).
    ///
    /// The body is read only by writes, and only up to the configured limit (413 beyond).
    /// Every answer carries the request's id ([`RequestId::from_headers`]) in
    /// `X-Request-Id`. Tracing, at `DEBUG` (as tower-http's `TraceLayer` does): the request
    /// runs in a `request` span with the id and OpenTelemetry's HTTP fields, with child
    /// spans for the version check and store calls ([`trace`](crate::trace): what a
    /// `tracing-opentelemetry` layer exports), and ends with one event at
    /// target `books_core::access` (status, latency); a store failure is logged at `WARN`
    /// (unavailable) or `ERROR` with the request's id whatever the level. Metrics: see
    /// [`metrics`](crate::metrics).
    ///
    /// The future holds its own handle on the API (not a borrow of `self`), so a binding
    /// can box or spawn it as it is.
    pub fn handle<B>(&self, request: Request<B>) -> impl Future<Output = Response<Bytes>> + use<B>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.answer(request, None)
    }

    /// [`handle`](Self::handle) under an id the host already gave the request (its
    /// connection loop logs with it), instead of reading `X-Request-Id` again.
    pub fn handle_as<B>(
        &self,
        request: Request<B>,
        id: RequestId,
    ) -> impl Future<Output = Response<Bytes>> + use<B>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.answer(request, Some(id))
    }

    fn answer<B>(
        &self,
        request: Request<B>,
        id: Option<RequestId>,
    ) -> impl Future<Output = Response<Bytes>> + use<B>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // Taken apart before the future is made, which uses the parts in place: an
        // `async fn` keeps its arguments twice in its state (as given, and bound), and
        // the request once more (`scripts/load.py --instructions --workloads 304`).
        let (parts, body) = request.into_parts();
        let api = self.clone();
        async move {
            let timer = RequestTimer::start();
            let id = id.unwrap_or_else(|| RequestId::from_headers(&parts.headers));
            let (routed, route) = api.destination(&parts);
            // DEBUG: a span at a level a subscriber keeps costs it a few microseconds per
            // request, a fifth of a ping (`scripts/load.py` with `RUST_LOG=books_core=debug`).
            // The server span, named by the method and the route template, with
            // OpenTelemetry's HTTP fields (`crate::trace`).
            let config = &api.inner.config;
            let request =
                trace::SpanRequest::new(&parts, &id, config.prefix(), config.base_url(), route);
            let span = match config.request_span_maker() {
                Some(make) => make.make_span(&request),
                None => request.default_span(),
            };
            let respond = api.respond(&parts, routed, body, &id);
            // A span no subscriber wants is not entered around every poll.
            let mut response = if span.is_disabled() {
                respond.await
            } else {
                respond.instrument(span.clone()).await
            };
            if parts.method == Method::GET || parts.method == Method::HEAD {
                if api.inner.config.compression() {
                    match routed {
                        #[cfg(feature = "docs-page")]
                        Routed::Endpoint(Endpoint::Docs(path)) => {
                            path.encode(&parts.headers, &mut response);
                        }
                        _ => compression::encode(
                            api.inner.cache.as_ref(),
                            &parts.headers,
                            &mut response,
                        ),
                    }
                }
                conditional::not_modified_if_matching(&parts.headers, &mut response);
            }
            if parts.method == Method::HEAD {
                *response.body_mut() = Bytes::new();
            }
            span.in_scope(|| {
                tracing::debug!(
                    target: "books_core::access",
                    status = response.status().as_u16(),
                    latency_us = timer.elapsed().as_micros() as u64,
                    "answered"
                );
            });
            trace::answered(&span, response.status());
            timer.answered(&parts.method, route, response.status());
            stamp::stamp(&mut response, id, || config.unix_seconds());
            response
        }
    }

    /// Whether the store answers: one cheap store call ([`BookStore::ready`]). Fold it
    /// into a readiness probe with a timeout of your own (the core has no timer).
    pub async fn ready(&self) -> Result<(), StoreError> {
        untraced_store_call("ready", self.inner.store.data.ready()).await
    }

    /// The answer of the endpoint a request was routed to.
    async fn dispatch<B>(
        &self,
        endpoint: Endpoint,
        parts: &http::request::Parts,
        body: B,
        format: Format,
    ) -> Handled
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let query = parts.uri.query();
        if matches!(
            endpoint,
            Endpoint::Create | Endpoint::Update(_) | Endpoint::Delete(_)
        ) {
            self.authorize(&parts.headers)?;
        }
        match endpoint {
            Endpoint::Ping => Ok(self.ping(format)),
            Endpoint::OpenApi => Ok(self.openapi()),
            #[cfg(feature = "docs-page")]
            Endpoint::Docs(path) => Ok(path.answer(self.inner.config.compression())),
            Endpoint::List { action } => self.list(parts, action, format).await,
            Endpoint::Get(id) => {
                let includes = query::includes(query)?;
                self.get(parts, id, includes, format).await
            }
            // Boxed: the write path's state (body, multipart, validation) would otherwise
            // make every read's future several times larger, and costlier to move.
            Endpoint::Create | Endpoint::Update(_) => {
                Box::pin(self.write(endpoint, parts, body, format)).await
            }
            Endpoint::Delete(id) => {
                let id = id.ok_or_else(Problem::book_not_found)?;
                Box::pin(self.delete(id, parts, format)).await
            }
        }
    }

    /// Where the request goes, and the route template it was routed to.
    fn destination(&self, parts: &http::request::Parts) -> (Routed, &'static str) {
        match self.relative(parts.uri.path()) {
            Some(path) => route(path, &parts.method, &self.inner.config),
            None => (Routed::NotFound, UNMATCHED),
        }
    }

    /// The answer to a request routed to `routed`.
    async fn respond<B>(
        &self,
        parts: &http::request::Parts,
        routed: Routed,
        body: B,
        id: &RequestId,
    ) -> Response<Bytes>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if let Routed::Options(allow) = routed {
            let mut response = Response::new(Bytes::new());
            *response.status_mut() = StatusCode::NO_CONTENT;
            let headers = response.headers_mut();
            headers.insert(ALLOW, allow.header());
            headers.insert(CACHE_CONTROL, render::NO_STORE);
            return response;
        }
        let Some(format) = negotiate(&parts.headers).or_else(|| any_accept(routed)) else {
            let problem = Problem::not_acceptable();
            return render::problem(&problem, Format::Json, id);
        };
        let result = match routed {
            Routed::Endpoint(endpoint) => self.dispatch(endpoint, parts, body, format).await,
            Routed::MethodNotAllowed(allow) => Err(Problem::method_not_allowed(allow.header())),
            Routed::NotFound | Routed::Options(_) => Err(Problem::not_found()),
        };
        result.unwrap_or_else(|problem| {
            log_failure(&problem, parts, id);
            render::problem(&problem, format, id)
        })
    }
}

/// The format of an answer whose body does not depend on `Accept` (the reference page
/// and its assets: a browser asks for HTML, scripts, styles and images), when `Accept`
/// allows neither JSON nor XML; `None` (406) for every other answer.
fn any_accept(routed: Routed) -> Option<Format> {
    match routed {
        #[cfg(feature = "docs-page")]
        Routed::Endpoint(Endpoint::Docs(_)) => Some(Format::Json),
        _ => None,
    }
}

/// Logs a store failure behind a problem, once, with the request's id, method and path
/// (the `request` span, when kept, adds the route). Unavailable stores (an outage fails
/// every request) are warned of at most once per 5 s, with how many were held back;
/// each one is at `DEBUG`.
fn log_failure(problem: &Problem, parts: &http::request::Parts, id: &RequestId) {
    static UNAVAILABLE: LogThrottle = LogThrottle::new(Duration::from_secs(5));
    let Some(cause) = &problem.cause else {
        return;
    };
    let (method, path) = (&parts.method, parts.uri.path());
    let error = ErrorChain(&**cause);
    if problem.status != StatusCode::SERVICE_UNAVAILABLE {
        tracing::error!(request_id = %id, %method, path, %error, "store failure");
    } else if let Some(held_back) = UNAVAILABLE.allow() {
        tracing::warn!(request_id = %id, %method, path, %error, held_back, "store unavailable");
    } else {
        tracing::debug!(request_id = %id, %method, path, %error, "store unavailable");
    }
}
