//! [`BooksApi`]: the entry point a binding hands requests to.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use chrono::Datelike;
use http::header::{ALLOW, AUTHORIZATION, CONTENT_TYPE, ETAG, HeaderValue, LOCATION};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use subtle::ConstantTimeEq;
use tracing::Instrument;

use crate::body;
use crate::cache::{Cache, Key, PageRows, Rendered, Source, copy, read_through};
use crate::compression::Compression;
use crate::conditional::{self, IfMatch};
use crate::config::Config;
use crate::idempotency::{self, InFlight};
use crate::metrics::{RequestTimer, store_call};
use crate::negotiate::{Format, negotiate};
use crate::pagination::{Links, Meta};
use crate::problem::{ErrorChain, Problem};
use crate::query::{self, Includes};
use crate::render::{self, BookView, Deleted, PageView, Ping};
use crate::request_id::{REQUEST_ID, RequestId};
use crate::route::{Endpoint, Routed, UNMATCHED, route};
use crate::store::{
    BookInput, BookRecord, BookStore, Guarded, IdempotencyKey, KeyedCreate, StoreError,
};
use crate::validate::validate;

/// The books API over one store and one configuration. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct BooksApi {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn BookStore>,
    config: Config,
    /// The OpenAPI document as served, made on its first request (making it parses and
    /// writes the whole document: most of what building an API cost, BENCHMARKS.md).
    openapi: OnceLock<Bytes>,
    /// Rendered answers, when the configuration caches.
    cache: Option<Cache>,
    /// Compressed answers, when the configuration compresses.
    compression: Option<Compression>,
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
    /// An API serving `store` as `config` says.
    pub fn new(store: impl BookStore, config: Config) -> Self {
        Self::from_arc(Arc::new(store), config)
    }

    /// An API over a store that is already shared.
    pub fn from_arc(store: Arc<dyn BookStore>, config: Config) -> Self {
        let cache = config.cache().map(Cache::new);
        let compression = config
            .compression()
            .then(|| Compression::new(config.cache()));
        Self {
            inner: Arc::new(Inner {
                store,
                config,
                openapi: OnceLock::new(),
                cache,
                compression,
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
        let scheme = self.inner.config.route_scheme();
        match route(path, &Method::OPTIONS, scheme, self.inner.config.openapi()).0 {
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
    /// `X-Request-Id`; the request runs in a `request` tracing span with the id, method and
    /// route, and ends with one event at target `books_core::access` (status, latency).
    /// Metrics: see [`metrics`](crate::metrics).
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
        // the request once more (BENCHMARKS.md, "304s").
        let (parts, body) = request.into_parts();
        let api = self.clone();
        async move {
            let timer = RequestTimer::start();
            let id = id.unwrap_or_else(|| RequestId::from_headers(&parts.headers));
            let (routed, route) = api.destination(&parts);
            let span =
                tracing::info_span!("request", id = %id, method = %parts.method, route = %route);
            let mut response = api
                .respond(&parts, routed, body, &id)
                .instrument(span.clone())
                .await;
            if parts.method == Method::GET || parts.method == Method::HEAD {
                if let Some(compression) = &api.inner.compression {
                    compression.encode(&parts.headers, &mut response);
                }
                conditional::not_modified_if_matching(&parts.headers, &mut response);
            }
            if parts.method == Method::HEAD {
                *response.body_mut() = Bytes::new();
            }
            response
                .headers_mut()
                .insert(REQUEST_ID, id.header_value().clone());
            span.in_scope(|| {
                tracing::info!(
                    target: "books_core::access",
                    status = response.status().as_u16(),
                    latency_us = timer.elapsed().as_micros() as u64,
                    "answered"
                );
            });
            timer.answered(&parts.method, route, response.status());
            response
        }
    }

    /// Whether the store answers: one cheap store call ([`BookStore::ready`]). Fold it
    /// into a readiness probe with a timeout of your own (the core has no timer).
    pub async fn ready(&self) -> Result<(), StoreError> {
        store_call("ready", self.inner.store.ready()).await
    }

    /// Where the request goes, and the route template it was routed to.
    fn destination(&self, parts: &http::request::Parts) -> (Routed, &'static str) {
        match self.relative(parts.uri.path()) {
            Some(path) => route(
                path,
                &parts.method,
                self.inner.config.route_scheme(),
                self.inner.config.openapi(),
            ),
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
            response.headers_mut().insert(ALLOW, allow.header());
            return response;
        }
        let Some(format) = negotiate(&parts.headers) else {
            let problem = Problem::not_acceptable();
            return render::problem(&problem, Format::Json, id);
        };
        let result = match routed {
            Routed::Endpoint(endpoint) => self.dispatch(endpoint, parts, body, format).await,
            Routed::MethodNotAllowed(allow) => Err(Problem::method_not_allowed(allow)),
            Routed::NotFound | Routed::Options(_) => Err(Problem::not_found()),
        };
        result.unwrap_or_else(|problem| {
            log_failure(&problem, parts);
            render::problem(&problem, format, id)
        })
    }

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
            Endpoint::OpenApi => Ok(render::document(
                self.inner
                    .openapi
                    .get_or_init(|| crate::openapi::served(&self.inner.config))
                    .clone(),
            )),
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

    /// A delete, conditional on `If-Match` when the request has one.
    async fn delete(&self, id: i64, parts: &http::request::Parts, format: Format) -> Handled {
        let store = &*self.inner.store;
        let deleted = match IfMatch::from_headers(&parts.headers) {
            Some(if_match) => {
                // The tag a GET with this request's `Accept` and `include` would carry;
                // an `include` that is not valid counts as none (DELETE ignores it).
                let includes = query::includes(parts.uri.query()).unwrap_or_default();
                let precondition = current_tag_in(&if_match, includes, format);
                match store_call("delete", store.delete_if(id, &precondition)).await? {
                    Guarded::Done(deleted) => deleted,
                    Guarded::Refused(book) => {
                        let current = render_book(&book, includes, format);
                        return Err(Problem::precondition_failed(etag_of(&current)));
                    }
                }
            }
            None => {
                if self.inner.config.require_if_match() {
                    return match store_call("get", store.get(id)).await? {
                        Some(_) => Err(Problem::precondition_required()),
                        None => Err(Problem::book_not_found()),
                    };
                }
                store_call("delete", store.delete(id)).await?
            }
        };
        if !deleted {
            return Err(Problem::book_not_found());
        }
        self.wrote();
        Ok(render::success(
            StatusCode::OK,
            format,
            "deleted",
            &Deleted { id },
        ))
    }

    /// Create and update: read and decode the body, validate, write (which returns the
    /// book as stored).
    async fn write<B>(
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
        let includes = query::includes(query)?;
        let key = match endpoint {
            Endpoint::Create => {
                idempotency::key(&parts.headers).map_err(|()| Problem::bad_idempotency_key())?
            }
            _ => None,
        };
        let limit = self.inner.config.body_limit();
        let bytes = body::read(&parts.headers, body, limit).await?;
        let fingerprint = key.as_ref().map(|_| {
            // The route as routed (one trailing slash is the same route).
            let route = self.relative(parts.uri.path()).unwrap_or_default();
            let route = route.strip_suffix('/').unwrap_or(route);
            idempotency::fingerprint(route, parts.headers.get(CONTENT_TYPE), &bytes)
        });
        let fields = body::decode(&parts.headers, bytes).await?;
        let now = self.inner.config.now();
        let store = &*self.inner.store;
        if let (Some(key), Some(fingerprint)) = (key, fingerprint) {
            let Some(_held) = self.inner.in_flight.hold(&key) else {
                crate::metrics::idempotency("conflict");
                return Err(Problem::idempotency_key_in_progress());
            };
            if let Some(replay) = self.replay(&key, &fingerprint, now).await? {
                return Ok(replay);
            }
            let input = validate(fields, store, now.year()).await?;
            return self
                .create_keyed(input, key, fingerprint, includes, format)
                .await;
        }
        let input = validate(fields, store, now.year()).await?;
        // The write checks the author (one round trip, not two).
        if let Endpoint::Update(id) = endpoint {
            return self.update(id, &input, parts, includes, format).await;
        }
        let book = store_call("create", store.create(&input, now)).await?;
        self.wrote();
        Ok(self.created(&book, includes, format))
    }

    /// A PUT of a valid book: conditional on `If-Match` when the request has one.
    async fn update(
        &self,
        id: Option<i64>,
        input: &BookInput,
        parts: &http::request::Parts,
        includes: Includes,
        format: Format,
    ) -> Handled {
        let store = &*self.inner.store;
        let now = self.inner.config.now();
        let updated = match (id, IfMatch::from_headers(&parts.headers)) {
            (None, _) => None,
            (Some(id), Some(if_match)) => {
                let precondition = current_tag_in(&if_match, includes, format);
                let updated = store.update_if(id, input, now, &precondition);
                match store_call("update", updated).await? {
                    Guarded::Done(updated) => updated,
                    Guarded::Refused(book) => {
                        let current = render_book(&book, includes, format);
                        return Err(Problem::precondition_failed(etag_of(&current)));
                    }
                }
            }
            (Some(id), None) if self.inner.config.require_if_match() => {
                match store_call("get", store.get(id)).await? {
                    Some(_) => return Err(Problem::precondition_required()),
                    None => None,
                }
            }
            (Some(id), None) => store_call("update", store.update(id, input, now)).await?,
        };
        if let Some(book) = updated {
            self.wrote();
            return Ok(render_book(&book, includes, format));
        }
        // PUT validates before it looks for the book: a missing author is a 422.
        if !store_call("author_exists", store.author_exists(input.author_id)).await? {
            return Err(Problem::author_invalid());
        }
        Err(Problem::book_not_found())
    }

    /// The answer kept for `key`, replayed, if the request that used it first is this
    /// one (422 if it is another).
    async fn replay(
        &self,
        key: &str,
        fingerprint: &[u8],
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<Response<Bytes>>, Problem> {
        let record = store_call(
            "idempotency_record",
            self.inner.store.idempotency_record(key, now),
        )
        .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        if record.fingerprint != fingerprint {
            crate::metrics::idempotency("mismatch");
            return Err(Problem::idempotency_key_reused());
        }
        crate::metrics::idempotency("replayed");
        Ok(Some(idempotency::answer(&record.answer, true)))
    }

    /// A create with an idempotency key: the book and the key's record in one store
    /// transaction. If another process committed the key first, its answer is replayed.
    async fn create_keyed(
        &self,
        input: BookInput,
        key: String,
        fingerprint: Vec<u8>,
        includes: Includes,
        format: Format,
    ) -> Handled {
        let now = self.inner.config.now();
        let ttl = chrono::TimeDelta::from_std(self.inner.config.idempotency_ttl())
            .unwrap_or(chrono::TimeDelta::MAX);
        let api = self.clone();
        let keyed = IdempotencyKey {
            key: key.clone(),
            fingerprint: fingerprint.clone(),
            expires_at: now
                .checked_add_signed(ttl)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC),
            answer: Arc::new(move |book: &BookRecord| {
                idempotency::keep(&api.created(book, includes, format))
            }),
        };
        let store = &*self.inner.store;
        match store_call("create", store.create_keyed(&input, now, &keyed)).await? {
            KeyedCreate::Created(book) => {
                self.wrote();
                crate::metrics::idempotency("stored");
                self.forget_expired_keys(now).await;
                Ok(idempotency::answer(&(keyed.answer)(&book), false))
            }
            KeyedCreate::Taken => match self.replay(&key, &fingerprint, now).await? {
                Some(replay) => Ok(replay),
                // Taken, then expired before it could be read: the client may retry.
                None => Err(Problem::idempotency_key_in_progress()),
            },
        }
    }

    /// Forgets a small batch of expired idempotency keys, at most once a minute per
    /// process (after a keyed create), so the store needs no scheduled job.
    async fn forget_expired_keys(&self, now: chrono::DateTime<chrono::Utc>) {
        let last = self.inner.forgotten_at.load(Ordering::Relaxed);
        let due = now.timestamp() - last >= 60;
        if !due
            || self
                .inner
                .forgotten_at
                .compare_exchange(last, now.timestamp(), Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let forgotten = self.inner.store.forget_expired_keys(now, FORGET_BATCH);
        if let Err(error) = store_call("forget_expired_keys", forgotten).await {
            tracing::warn!(error = %ErrorChain(&error), "forgetting expired idempotency keys failed");
        }
    }

    /// The 201 for a created book: the book, its `ETag` and `Location`.
    fn created(&self, book: &BookRecord, includes: Includes, format: Format) -> Response<Bytes> {
        let mut response = render_book(book, includes, format);
        *response.status_mut() = StatusCode::CREATED;
        let location = format!("{}/books/{}", self.mount_url(), book.id);
        if let Ok(location) = HeaderValue::try_from(location) {
            response.headers_mut().insert(LOCATION, location);
        }
        response
    }

    /// Checks the bearer token writes need, if one is configured (constant time).
    fn authorize(&self, headers: &http::HeaderMap) -> Result<(), Problem> {
        let Some(expected) = self.inner.config.write_token() else {
            return Ok(());
        };
        let given = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
            Ok(())
        } else {
            Err(Problem::unauthorized())
        }
    }

    /// The ping answer, rendered once per second and format (the extended ping's time has
    /// whole seconds) and copied from then on: rendering it cost more than the rest of
    /// the API's part of a ping (BENCHMARKS.md, "The server's fixed cost").
    fn ping(&self, format: Format) -> Response<Bytes> {
        let config = &self.inner.config;
        let extended = config.extended_ping();
        let now = extended.then(|| config.now());
        let second = now.map_or(0, |now| now.timestamp());
        let mut pings = self
            .inner
            .pings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let slot = &mut pings[usize::from(format == Format::Xml)];
        match slot {
            Some((at, answer)) if *at == second => copy(answer),
            _ => {
                let ping = Ping {
                    status: "ok",
                    time: now.map(|now| now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                    version: extended.then_some(crate::VERSION),
                };
                let mut answer = render::success(StatusCode::OK, format, "ping", &ping);
                // A slot for each copy's request id, so inserting it never grows the copy's
                // header map (as the cache's answers keep one).
                answer
                    .headers_mut()
                    .insert(REQUEST_ID, HeaderValue::from_static(""));
                let copied = copy(&answer);
                *slot = Some((second, answer));
                copied
            }
        }
    }

    async fn list(&self, parts: &http::request::Parts, action: bool, format: Format) -> Handled {
        let (page, includes) = query::page_and_includes(parts.uri.query())?;
        let key = Key::List {
            page,
            author: includes.author,
            action,
            xml: format == Format::Xml,
        };
        let inner = &self.inner;
        read_through(
            inner.cache.as_ref(),
            &inner.store,
            key,
            &parts.headers,
            |source| self.render_list(source, page, includes, action, format),
        )
        .await
    }

    /// A page's answer: read (with the version it was read at), or a kept page's rows
    /// under a new total.
    async fn render_list(
        &self,
        source: Source,
        page: u64,
        includes: Includes,
        action: bool,
        format: Format,
    ) -> Result<Rendered, Problem> {
        let per_page = self.inner.config.page_size().get();
        let (rows, version) = match source {
            Source::Rows(rows, total) => {
                let rows = PageRows {
                    books: rows.books.clone(),
                    full: rows.full,
                    total,
                };
                (rows, None)
            }
            Source::Read => {
                let offset = Meta::offset(page, per_page);
                let found = store_call("list", self.inner.store.list(offset, per_page)).await?;
                let rows = PageRows {
                    full: found.books.len() == per_page as usize,
                    books: found.books,
                    total: found.total,
                };
                (rows, found.version)
            }
        };
        let meta = Meta::new(page, per_page, rows.total);
        let list_url = format!(
            "{}/books{}",
            self.mount_url(),
            if action { "/list" } else { "" }
        );
        let links = Links::new(&list_url, &meta, includes);
        let view = PageView {
            data: rows
                .books
                .iter()
                .map(|b| BookView::new(b, includes))
                .collect(),
            meta,
            links,
        };
        let answer = tagged(render::success(StatusCode::OK, format, "books", &view));
        Ok(Rendered {
            answer,
            version,
            rows: Some(Arc::new(rows)),
        })
    }

    /// One book, reusing a rendered answer while the store's version holds.
    async fn get(
        &self,
        parts: &http::request::Parts,
        id: Option<i64>,
        includes: Includes,
        format: Format,
    ) -> Handled {
        let id = id.ok_or_else(Problem::book_not_found)?;
        let key = Key::Book {
            id,
            author: includes.author,
            xml: format == Format::Xml,
        };
        let inner = &self.inner;
        read_through(
            inner.cache.as_ref(),
            &inner.store,
            key,
            &parts.headers,
            |_| self.read_book(id, includes, format),
        )
        .await
    }

    /// A book's answer and the version it was read at.
    async fn read_book(
        &self,
        id: i64,
        includes: Includes,
        format: Format,
    ) -> Result<Rendered, Problem> {
        let (book, version) = store_call("get", self.inner.store.get_versioned(id)).await?;
        let book = book.ok_or_else(Problem::book_not_found)?;
        Ok(Rendered {
            answer: render_book(&book, includes, format),
            version,
            rows: None,
        })
    }

    /// After a write of ours: cached answers are served again only once a check has
    /// seen it.
    fn wrote(&self) {
        if let Some(cache) = &self.inner.cache {
            cache.wrote();
        }
    }

    /// `base_url` + prefix: where links start.
    fn mount_url(&self) -> String {
        format!(
            "{}{}",
            self.inner.config.base_url(),
            self.inner.config.prefix()
        )
    }
}

/// Expired idempotency keys forgotten at a time.
const FORGET_BATCH: u32 = 100;

/// The precondition "`if_match` names the `ETag` a GET with `includes` in `format` would
/// carry for the book as it is".
fn current_tag_in(
    if_match: &IfMatch,
    includes: Includes,
    format: Format,
) -> impl Fn(&BookRecord) -> bool + Send + Sync + '_ {
    move |book| if_match.matches(etag_of(&render_book(book, includes, format)).as_ref())
}

/// An answer's `ETag`.
fn etag_of(response: &Response<Bytes>) -> Option<HeaderValue> {
    response.headers().get(ETAG).cloned()
}

/// One book's answer, tagged.
fn render_book(book: &BookRecord, includes: Includes, format: Format) -> Response<Bytes> {
    let view = BookView::new(book, includes);
    tagged(render::success(StatusCode::OK, format, "book", &view))
}

/// A book or page answer with its strong `ETag`.
fn tagged(mut response: Response<Bytes>) -> Response<Bytes> {
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(HeaderValue::as_bytes);
    let tag = conditional::etag(content_type.unwrap_or_default(), response.body());
    response.headers_mut().insert(ETAG, tag);
    response
}

/// Logs a store failure behind a problem, once, with the request's method and path (the
/// `request` span adds its id and route).
fn log_failure(problem: &Problem, parts: &http::request::Parts) {
    let Some(cause) = &problem.cause else {
        return;
    };
    let (method, path) = (&parts.method, parts.uri.path());
    let error = ErrorChain(&**cause);
    if problem.status == StatusCode::SERVICE_UNAVAILABLE {
        tracing::warn!(%method, path, %error, "store unavailable");
    } else {
        tracing::error!(%method, path, %error, "store failure");
    }
}
