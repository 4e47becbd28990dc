//! The handlers behind each endpoint: ping, the OpenAPI document, list, get, and the
//! writes (create, update, delete, with `If-Match` and idempotency keys). The request
//! wrapper they run under (id, span, timer, negotiation, routing) is the parent module.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use chrono::{DateTime, Datelike};
use http::header::{AUTHORIZATION, CONTENT_TYPE, ETAG, HeaderValue, LOCATION};
use http::{Response, StatusCode};
use http_body::Body;
use subtle::ConstantTimeEq;

use super::{BooksApi, Handled};
use crate::body;
use crate::cache::{Key, PageRows, Rendered, Source, copy, read_through};
use crate::compression;
use crate::conditional::{self, IfMatch};
use crate::idempotency;
use crate::metrics::store_call;
use crate::negotiate::Format;
use crate::pagination::{Links, Meta};
use crate::problem::{ErrorChain, Problem};
use crate::query::{self, Includes};
use crate::render::{self, BookView, Deleted, PageView, Ping};
use crate::request_id::REQUEST_ID;
use crate::route::Endpoint;
use crate::store::{BookInput, BookRecord, Guarded, IdempotencyKey, KeyedCreate};
use crate::validate::validate;

impl BooksApi {
    pub(super) async fn dispatch<B>(
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
            Endpoint::OpenApi => Ok(self.varying(render::document(
                self.inner
                    .openapi
                    .get_or_init(|| crate::openapi::served(&self.inner.config))
                    .clone(),
            ))),
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
        let second = if extended { config.unix_seconds() } else { 0 };
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
                    time: extended.then(|| {
                        let now = DateTime::from_timestamp(second, 0).unwrap_or_default();
                        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    }),
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
        let answer = self.varying(tagged(render::success(
            StatusCode::OK,
            format,
            "books",
            &view,
        )));
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
            answer: self.varying(render_book(&book, includes, format)),
            version,
            rows: None,
        })
    }

    /// A GET answer that may have encoded variants, its `Vary` naming `Accept-Encoding`
    /// too when answers are compressed.
    fn varying(&self, mut answer: Response<Bytes>) -> Response<Bytes> {
        if self.inner.compression.is_some() {
            compression::vary(&mut answer);
        }
        answer
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
