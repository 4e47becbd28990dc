//! Embedding configuration.

use std::fmt::Debug;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use http::HeaderValue;

use crate::clock::{Clock, SystemClock};
use crate::trace::{MakeRequestSpan, SpanMaker};

/// How much the cache of rendered answers and compressed bodies may hold, both together
/// (see [`Config::with_cache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most entries kept (answers and compressed bodies).
    pub entries: usize,
    /// Most body bytes kept.
    pub bytes: usize,
}

impl Default for CacheLimits {
    /// 1,024 entries and 16 MiB of bodies.
    fn default() -> Self {
        Self {
            entries: 1024,
            bytes: 16 * 1024 * 1024,
        }
    }
}

/// What `Cache-Control` tells browsers and shared caches about book and page answers
/// ([`Config::with_cache_control`]); every other answer carries `no-store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheControl {
    /// `no-cache` (the default): a cache may keep an answer, but revalidates it with its
    /// `ETag` before every use, so the exactness rule holds for every client behind any
    /// cache.
    #[default]
    NoCache,
    /// `max-age=N`: a cache may reuse an answer for N seconds without asking. A client
    /// behind such a cache may see a book or page up to N seconds older than a write
    /// acknowledged before its read began: the exactness rule relaxed to N seconds of
    /// staleness.
    MaxAge(u32),
}

impl CacheControl {
    /// The header value.
    pub fn header_value(self) -> HeaderValue {
        match self {
            Self::NoCache => HeaderValue::from_static("no-cache"),
            Self::MaxAge(seconds) => HeaderValue::try_from(format!("max-age={seconds}"))
                .expect("digits are a header value"),
        }
    }
}

impl FromStr for CacheControl {
    type Err = String;

    /// `no-cache`, or `max-age=N` (N in seconds).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("no-cache") {
            return Ok(Self::NoCache);
        }
        s.strip_prefix("max-age=")
            .and_then(|n| n.parse().ok())
            .map(Self::MaxAge)
            .ok_or_else(|| format!("{s:?} is neither no-cache nor max-age=<seconds>"))
    }
}

/// How a [`BooksApi`](crate::BooksApi) is mounted and behaves.
///
/// Built from [`Config::default`] with the `with_*` methods:
///
/// ```
/// use books_core::{Config, RouteScheme};
/// let config = Config::default()
///     .with_prefix("/v1/")
///     .with_base_url("https://books.example.com/")
///     .with_route_scheme(RouteScheme::Index);
/// assert_eq!(config.prefix(), "/v1");
/// assert_eq!(config.base_url(), "https://books.example.com");
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    prefix: String,
    base_url: String,
    page_size: NonZeroU32,
    route_scheme: RouteScheme,
    extended_ping: bool,
    body_limit: usize,
    write_token: Option<Arc<str>>,
    openapi: bool,
    docs: bool,
    cache: Option<CacheLimits>,
    cache_control: CacheControl,
    compression: bool,
    require_if_match: bool,
    idempotency_ttl: Duration,
    clock: Arc<dyn Clock>,
    request_span: Option<SpanMaker>,
}

impl Default for Config {
    /// Prefix `/api`, base URL `http://localhost:8080`, 20 books a page, both route
    /// schemes, basic ping, a 64 KiB body limit, the OpenAPI document served (the reference
    /// page not), the cache on with its default limits, `Cache-Control: no-cache` on books and pages,
    /// compression on, `If-Match` optional, idempotency keys kept 24 hours, and the
    /// system clock.
    fn default() -> Self {
        Self {
            prefix: "/api".into(),
            base_url: "http://localhost:8080".into(),
            page_size: NonZeroU32::new(20).expect("20 is not zero"),
            route_scheme: RouteScheme::Both,
            extended_ping: false,
            body_limit: 64 * 1024,
            write_token: None,
            openapi: true,
            docs: false,
            cache: Some(CacheLimits::default()),
            cache_control: CacheControl::NoCache,
            compression: true,
            require_if_match: false,
            idempotency_ttl: Duration::from_secs(24 * 60 * 60),
            clock: Arc::new(SystemClock),
            request_span: None,
        }
    }
}

impl Config {
    /// Sets the mount prefix (`/api`); leading slash added, trailing slashes dropped,
    /// `""` or `"/"` mounts at the root.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        let trimmed = prefix.trim_matches('/');
        self.prefix = if trimmed.is_empty() {
            String::new()
        } else {
            format!("/{trimmed}")
        };
        self
    }

    /// Sets the absolute URL that links and `Location` start with (trailing slashes dropped).
    pub fn with_base_url(mut self, base_url: &str) -> Self {
        self.base_url = base_url.trim_end_matches('/').to_owned();
        self
    }

    /// Sets the number of books on a page.
    pub fn with_page_size(mut self, page_size: NonZeroU32) -> Self {
        self.page_size = page_size;
        self
    }

    /// Chooses which route scheme(s) to serve.
    pub fn with_route_scheme(mut self, scheme: RouteScheme) -> Self {
        self.route_scheme = scheme;
        self
    }

    /// Adds `time` and `version` to the ping answer.
    pub fn with_extended_ping(mut self, extended: bool) -> Self {
        self.extended_ping = extended;
        self
    }

    /// Sets the largest request body accepted, in bytes (larger ones get 413).
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Requires `Authorization: Bearer <token>` on POST, PUT and DELETE (401 otherwise);
    /// reads stay open. `None` (the default) leaves writes open, as the contract describes.
    pub fn with_write_token(mut self, token: Option<&str>) -> Self {
        self.write_token = token.filter(|t| !t.is_empty()).map(Arc::from);
        self
    }

    /// Whether `GET {prefix}/openapi.json` serves the API's OpenAPI 3.1 document (its
    /// server URL set to the base URL and prefix). On by default.
    pub fn with_openapi(mut self, served: bool) -> Self {
        self.openapi = served;
        self
    }

    /// Whether `GET {prefix}/docs` serves an interactive reference page (Swagger UI) built
    /// from `{prefix}/openapi.json`, with "try it" against this API; its scripts and
    /// styles are built into the crate and served from the API's own origin under
    /// `{prefix}/docs/assets/` (cached by browsers for a year: their path names their
    /// version). Off by default; served only while the OpenAPI document is
    /// ([`with_openapi`](Self::with_openapi)), which it is built from.
    #[cfg(feature = "docs-page")]
    #[cfg_attr(docsrs, doc(cfg(feature = "docs-page")))]
    pub fn with_docs(mut self, served: bool) -> Self {
        self.docs = served;
        self
    }

    /// Bounds the cache of rendered book and page answers and of compressed bodies (one
    /// budget for both), or turns it off (`None`). Answers are reused only while the
    /// store's [version](crate::store::Versions) holds, checked after each read arrives,
    /// so a read never returns data older than the last write acknowledged before it
    /// started, whichever process wrote. A store without the versions tier has only its
    /// compressed bodies kept.
    pub fn with_cache(mut self, limits: Option<CacheLimits>) -> Self {
        self.cache = limits;
        self
    }

    /// What `Cache-Control` tells other caches about books and pages (`no-cache` by
    /// default: see [`CacheControl`]).
    pub fn with_cache_control(mut self, cache_control: CacheControl) -> Self {
        self.cache_control = cache_control;
        self
    }

    /// Whether GET and HEAD answers of 1 KiB or more go compressed (`gzip`, `br` or
    /// `zstd`, as the request's `Accept-Encoding` prefers), each encoding with a strong
    /// `ETag` of its own and `Vary: Accept, Accept-Encoding`. On by default. A host that
    /// compresses in a layer of its own instead (tower-http's `CompressionLayer`) should
    /// know that such layers keep the identity `ETag` on every encoding, which RFC 9110
    /// §8.8.3 forbids; with this on, they find the answer encoded and leave it alone.
    pub fn with_compression(mut self, compress: bool) -> Self {
        self.compression = compress;
        self
    }

    /// Whether `PUT` and `DELETE` of a book need `If-Match` (428 without it). Off by
    /// default.
    pub fn with_require_if_match(mut self, required: bool) -> Self {
        self.require_if_match = required;
        self
    }

    /// How long an idempotency key's record is kept after its create (24 hours by
    /// default); after that the key may be used afresh.
    pub fn with_idempotency_ttl(mut self, ttl: Duration) -> Self {
        self.idempotency_ttl = ttl;
        self
    }

    /// Makes each request's server span with `make` in place of the core's own `request`
    /// span (as tower-http's `MakeSpan`): a level and fields of the host's
    /// ([`MakeRequestSpan`](crate::trace::MakeRequestSpan) says what the core records on
    /// it).
    pub fn with_request_span(mut self, make: impl MakeRequestSpan) -> Self {
        self.request_span = Some(SpanMaker(Arc::new(make)));
        self
    }

    /// The host's maker of server spans, if it gave one.
    pub(crate) fn request_span_maker(&self) -> Option<&dyn MakeRequestSpan> {
        self.request_span.as_ref().map(|maker| &*maker.0)
    }

    /// Replaces the clock (tests pin the date with [`ManualClock`](crate::ManualClock)).
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The mount prefix, `""` when mounted at the root.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The base URL of links.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Books per page.
    pub fn page_size(&self) -> NonZeroU32 {
        self.page_size
    }

    /// The served route scheme(s).
    pub fn route_scheme(&self) -> RouteScheme {
        self.route_scheme
    }

    /// Whether ping answers with `time` and `version`.
    pub fn extended_ping(&self) -> bool {
        self.extended_ping
    }

    /// The body size limit in bytes.
    pub fn body_limit(&self) -> usize {
        self.body_limit
    }

    /// The token writes need, if any.
    pub fn write_token(&self) -> Option<&str> {
        self.write_token.as_deref()
    }

    /// Whether the OpenAPI document is served.
    pub fn openapi(&self) -> bool {
        self.openapi
    }

    /// Whether the reference page is served: turned on, and the OpenAPI document served
    /// too (never without the `docs-page` feature).
    pub fn docs(&self) -> bool {
        self.docs && self.openapi
    }

    /// The cache's limits, `None` when it is off.
    pub fn cache(&self) -> Option<CacheLimits> {
        self.cache
    }

    /// What `Cache-Control` says of books and pages.
    pub fn cache_control(&self) -> CacheControl {
        self.cache_control
    }

    /// Whether answers go compressed.
    pub fn compression(&self) -> bool {
        self.compression
    }

    /// Whether `PUT` and `DELETE` need `If-Match`.
    pub fn require_if_match(&self) -> bool {
        self.require_if_match
    }

    /// How long idempotency keys are kept.
    pub fn idempotency_ttl(&self) -> Duration {
        self.idempotency_ttl
    }

    /// The current time from the configured clock, to whole seconds.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now().trunc_subsecs(0)
    }

    /// The current time from the configured clock, in whole seconds since the Unix epoch.
    pub(crate) fn unix_seconds(&self) -> i64 {
        self.clock.unix_seconds()
    }
}

/// Which route names the API serves (see the contract's route table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RouteScheme {
    /// `GET /books`, `POST /books`, `PUT /books/{id}`, `DELETE /books/{id}`.
    Index,
    /// `GET /books/list`, `POST /books/create`, `PUT /books/update/{id}`, `DELETE /books/delete/{id}`.
    Action,
    /// Both of the above (the default).
    #[default]
    Both,
}

impl RouteScheme {
    pub(crate) fn index(self) -> bool {
        matches!(self, Self::Index | Self::Both)
    }

    pub(crate) fn action(self) -> bool {
        matches!(self, Self::Action | Self::Both)
    }
}

impl FromStr for RouteScheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "index" => Ok(Self::Index),
            "action" => Ok(Self::Action),
            "both" => Ok(Self::Both),
            _ => Err(format!(
                "unknown route scheme {s:?} (expected index, action or both)"
            )),
        }
    }
}
