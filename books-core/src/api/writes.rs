//! The write handlers: create, update and delete, with `If-Match` (the store's
//! conditional writes tier) and `Idempotency-Key` (its idempotent creates tier).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use chrono::{DateTime, Datelike, Utc};
use http::header::{AUTHORIZATION, CONTENT_TYPE, ETAG, HeaderValue, LOCATION};
use http::{Response, StatusCode};
use http_body::Body;
use subtle::ConstantTimeEq;

use super::{BooksApi, Handled};
use crate::body;
use crate::etag::IfMatch;
use crate::idempotency;
use crate::metrics::store_call;
use crate::negotiate::Format;
use crate::problem::{ErrorChain, Problem};
use crate::query::{self, Includes};
use crate::render::{self, Deleted};
use crate::route::Endpoint;
use crate::store::{
    BookInput, BookRecord, Conditional, IdempotencyKey, IdempotentCreates, KeyedCreate,
};
use crate::trace;
use crate::validate::validate;

/// Expired idempotency keys forgotten at a time.
const FORGET_BATCH: u32 = 100;

impl BooksApi {
    /// A delete, conditional on `If-Match` when the request has one.
    pub(super) async fn delete(
        &self,
        id: i64,
        parts: &http::request::Parts,
        format: Format,
    ) -> Handled {
        let store = &*self.inner.store.data;
        let deleted = match IfMatch::from_headers(&parts.headers) {
            Some(if_match) => {
                let Some(conditional) = &self.inner.store.conditional_writes else {
                    self.refuse_if_present(id, Problem::if_match_unsupported())
                        .await?;
                    return Err(Problem::book_not_found());
                };
                // The tag a GET with this request's `Accept` and `include` would carry;
                // an `include` that is not valid counts as none (DELETE ignores it).
                let includes = query::includes(parts.uri.query()).unwrap_or_default();
                let precondition = self.current_tag_in(&if_match, includes, format);
                let deleted = store_call("delete", conditional.delete_if(id, &precondition));
                match trace::if_match(deleted).await? {
                    Conditional::Done(deleted) => deleted,
                    Conditional::Refused(book) => {
                        return Err(self.precondition_failed(&book, includes, format));
                    }
                }
            }
            None if self.inner.config.require_if_match() => {
                self.refuse_if_present(id, Problem::precondition_required())
                    .await?;
                return Err(Problem::book_not_found());
            }
            None => store_call("delete", store.delete(id)).await?,
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
    pub(super) async fn write<B>(
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
        let store = &*self.inner.store.data;
        if let (Some(key), Some(fingerprint)) = (key, fingerprint) {
            let Some(keyed) = self.inner.store.idempotent_creates.as_deref() else {
                validate(fields, store, now.year()).await?;
                return Err(Problem::idempotency_unsupported());
            };
            let keyed_create = async {
                let Some(_held) = self.inner.in_flight.hold(&key) else {
                    crate::metrics::idempotency("conflict");
                    return Err(Problem::idempotency_key_in_progress());
                };
                if let Some(replay) = self.replay(keyed, &key, &fingerprint, now).await? {
                    return Ok(replay);
                }
                let input = validate(fields, store, now.year()).await?;
                self.create_keyed(keyed, input, key, fingerprint, includes, format)
                    .await
            };
            return trace::within(&trace::idempotency_span(), keyed_create).await;
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
        let store = &*self.inner.store.data;
        let now = self.inner.config.now();
        let updated = match (id, IfMatch::from_headers(&parts.headers)) {
            (None, _) => None,
            (Some(id), Some(if_match)) => match &self.inner.store.conditional_writes {
                Some(conditional) => {
                    let precondition = self.current_tag_in(&if_match, includes, format);
                    let updated = conditional.update_if(id, input, now, &precondition);
                    match trace::if_match(store_call("update", updated)).await? {
                        Conditional::Done(updated) => updated,
                        Conditional::Refused(book) => {
                            return Err(self.precondition_failed(&book, includes, format));
                        }
                    }
                }
                None => {
                    self.refuse_if_present(id, Problem::if_match_unsupported())
                        .await?
                }
            },
            (Some(id), None) if self.inner.config.require_if_match() => {
                self.refuse_if_present(id, Problem::precondition_required())
                    .await?
            }
            (Some(id), None) => store_call("update", store.update(id, input, now)).await?,
        };
        if let Some(book) = updated {
            self.wrote();
            return Ok(self.book(&book, includes, format));
        }
        // PUT validates before it looks for the book: a missing author is a 422.
        if !store_call("author_exists", store.author_exists(input.author_id)).await? {
            return Err(Problem::author_invalid());
        }
        Err(Problem::book_not_found())
    }

    /// `problem` for a write that cannot go on as asked (428 without `If-Match`, 501 when
    /// the store cannot check it) if the book exists; `None` when it does not (the
    /// caller's answer for a missing book follows, as without the precondition).
    async fn refuse_if_present(
        &self,
        id: i64,
        problem: Problem,
    ) -> Result<Option<BookRecord>, Problem> {
        match store_call("get", self.inner.store.data.get(id)).await? {
            Some(_) => Err(problem),
            None => Ok(None),
        }
    }

    /// The answer kept for `key`, replayed, if the request that used it first is this
    /// one (422 if it is another).
    async fn replay(
        &self,
        keyed: &dyn IdempotentCreates,
        key: &str,
        fingerprint: &[u8],
        now: DateTime<Utc>,
    ) -> Result<Option<Response<Bytes>>, Problem> {
        let record = store_call("idempotency_record", keyed.idempotency_record(key, now)).await?;
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
        keyed: &dyn IdempotentCreates,
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
        let record = IdempotencyKey {
            key: key.clone(),
            fingerprint: fingerprint.clone(),
            expires_at: now
                .checked_add_signed(ttl)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
            answer: Arc::new(move |book: &BookRecord| {
                idempotency::keep(&api.created(book, includes, format))
            }),
        };
        match store_call("create", keyed.create_keyed(&input, now, &record)).await? {
            KeyedCreate::Created(book) => {
                self.wrote();
                crate::metrics::idempotency("stored");
                self.forget_expired_keys(keyed, now).await;
                Ok(idempotency::answer(&(record.answer)(&book), false))
            }
            KeyedCreate::Taken => match self.replay(keyed, &key, &fingerprint, now).await? {
                Some(replay) => Ok(replay),
                // Taken, then expired before it could be read: the client may retry.
                None => Err(Problem::idempotency_key_in_progress()),
            },
        }
    }

    /// Forgets a small batch of expired idempotency keys, at most once a minute per
    /// process (after a keyed create), so the store needs no scheduled job.
    async fn forget_expired_keys(&self, keyed: &dyn IdempotentCreates, now: DateTime<Utc>) {
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
        let forgotten = keyed.forget_expired_keys(now, FORGET_BATCH);
        if let Err(error) = store_call("forget_expired_keys", forgotten).await {
            tracing::warn!(error = %ErrorChain(&error), "forgetting expired idempotency keys failed");
        }
    }

    /// The 201 for a created book: the book, its `ETag` and `Location`.
    fn created(&self, book: &BookRecord, includes: Includes, format: Format) -> Response<Bytes> {
        let mut response = self.book(book, includes, format);
        *response.status_mut() = StatusCode::CREATED;
        let location = format!("{}/books/{}", self.mount_url(), book.id);
        if let Ok(location) = HeaderValue::try_from(location) {
            response.headers_mut().insert(LOCATION, location);
        }
        response
    }

    /// One book's answer as a GET would carry it.
    fn book(&self, book: &BookRecord, includes: Includes, format: Format) -> Response<Bytes> {
        render::book(book, includes, format, &self.inner.cache_control)
    }

    /// 412 for a conditional write the book as it is refused, with its current `ETag`.
    fn precondition_failed(
        &self,
        book: &BookRecord,
        includes: Includes,
        format: Format,
    ) -> Problem {
        let current = self.book(book, includes, format);
        Problem::precondition_failed(current.headers().get(ETAG).cloned())
    }

    /// The precondition "`if_match` names the `ETag` a GET with `includes` in `format`
    /// would carry for the book as it is".
    fn current_tag_in<'a>(
        &'a self,
        if_match: &'a IfMatch,
        includes: Includes,
        format: Format,
    ) -> impl Fn(&BookRecord) -> bool + Send + Sync + 'a {
        move |book| if_match.matches(self.book(book, includes, format).headers().get(ETAG))
    }

    /// Checks the bearer token writes need, if one is configured (constant time).
    pub(super) fn authorize(&self, headers: &http::HeaderMap) -> Result<(), Problem> {
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

    /// After a write of ours: cached answers are served again only once a check has
    /// seen it.
    fn wrote(&self) {
        if let Some(cache) = &self.inner.cache {
            cache.wrote();
        }
    }
}
