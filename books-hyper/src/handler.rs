//! The server's handler of one request: its own refusals (what hyper accepts but RFC
//! 9112 does not), the operator endpoints, CORS preflights, per-client rate limits and
//! shedding past the bound on requests in flight, then the API (`BooksApi::handle_as`).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use books_core::{BooksApi, REQUEST_ID, RequestId};
use http::header::{CONNECTION, HOST, HeaderValue, RETRY_AFTER, TRANSFER_ENCODING};
use http::{StatusCode, Version};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};

use crate::cors::Cors;
use crate::rate_limit::{Limiter, RATELIMIT, RATELIMIT_POLICY, Verdict};
use crate::response::{Response, problem};
use crate::{Limits, Operations};

/// What every request of every connection shares: the server's handler of a request.
pub(crate) struct Handler {
    pub(crate) api: BooksApi,
    pub(crate) operations: Operations,
    pub(crate) limits: Limits,
    /// API requests being answered (bounded by `limits.max_in_flight`).
    pub(crate) in_flight: AtomicUsize,
    pub(crate) cors: Option<Cors>,
    pub(crate) limiter: Option<Arc<Limiter>>,
    /// Whether API requests continue their callers' W3C trace context.
    #[cfg(feature = "opentelemetry")]
    pub(crate) trace_context: bool,
}

impl Handler {
    /// The answer to one request from `peer`: the loop's own refusals, the operator
    /// endpoints, CORS preflights, rate limits and shedding, then the API.
    pub(crate) async fn answer(
        self: Arc<Self>,
        peer: SocketAddr,
        request: hyper::Request<Incoming>,
    ) -> io::Result<Response> {
        // One id for the request's log lines here and in the API, and its answer.
        let id = RequestId::from_headers(request.headers());
        let method = request.method().clone();
        let bodiless = request.body().is_end_stream();
        // For the log line of a request that times out after it was handed on (shares its
        // bytes; only a request with a body can).
        let uri = (!bodiless).then(|| request.uri().clone());
        let path = request.uri().path();
        if let Some(refused) = refuse(&request, bodiless) {
            tracing::info!(request_id = %id, %method, %path, detail = refused, "refused");
            let mut response = problem(StatusCode::BAD_REQUEST, refused, "malformed", &id);
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            return Ok(response);
        }
        if self.operations.owns(path) {
            // Boxed: the operator endpoints are rare, and their future would size this one.
            let mut response = Box::pin(self.operations.answer(&method, path, &self.api)).await;
            response
                .headers_mut()
                .insert(REQUEST_ID, id.header_value().clone());
            return Ok(response);
        }
        if let Some(cors) = &self.cors
            && let Some(mut response) =
                cors.preflight(&method, request.headers(), || self.api.allow(path))
        {
            response
                .headers_mut()
                .insert(REQUEST_ID, id.header_value().clone());
            return Ok(response);
        }
        let origin = self
            .cors
            .as_ref()
            .and_then(|cors| cors.allowed(request.headers()));
        let mut rate = None;
        if let Some(limiter) = &self.limiter {
            let client = limiter.client(peer.ip(), request.headers());
            match limiter.check(client) {
                Verdict::Allowed(field) => rate = Some((limiter.policy().clone(), field)),
                Verdict::Limited(field, seconds) => {
                    tracing::debug!(request_id = %id, %method, %path, %client, "rate limited");
                    let status = StatusCode::TOO_MANY_REQUESTS;
                    let mut response = problem(status, RATE_LIMITED, "rate_limit", &id);
                    let headers = response.headers_mut();
                    headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
                    headers.insert(RATELIMIT_POLICY, limiter.policy().clone());
                    headers.insert(RATELIMIT, field);
                    return Ok(self.finish(response, origin, None));
                }
            }
        }
        let Some(_admitted) = Admitted::try_new(&self.in_flight, self.limits.max_in_flight) else {
            tracing::debug!(request_id = %id, %method, %path, "shed: too many requests in flight");
            let status = StatusCode::SERVICE_UNAVAILABLE;
            let mut response = problem(status, OVERLOADED, "overload", &id);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(self.finish(response, origin, rate));
        };
        // Only a request with a body can stall on its client: the others are bounded by
        // the store's own waits, and skip the timer (a fifteenth of a ping's
        // instructions).
        #[cfg(feature = "opentelemetry")]
        if self.trace_context {
            return self
                .answer_traced(request, id, origin, rate, bodiless)
                .await;
        }
        if bodiless {
            let response = self.api.handle_as(request, id).await;
            return Ok(self.finish(response.map(Full::new), origin, rate));
        }
        let answer = self.api.handle_as(request, id.clone());
        let answered = tokio::time::timeout(self.limits.request_timeout, answer).await;
        let Ok(response) = answered else {
            metrics::counter!(books_core::metrics::REJECTIONS, "reason" => "timeout").increment(1);
            let path = uri.as_ref().map_or("", |uri| uri.path());
            tracing::warn!(request_id = %id, %method, %path, %peer, "request timed out; dropping the connection");
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out"));
        };
        Ok(self.finish(response.map(Full::new), origin, rate))
    }

    /// The API's answer in the caller's trace (W3C trace context), bounded as
    /// [`answer`](Self::answer) bounds it. Boxed, and apart from `answer`: a server that
    /// does not continue traces keeps the smaller future it always had.
    #[cfg(feature = "opentelemetry")]
    fn answer_traced<'a>(
        &'a self,
        request: hyper::Request<Incoming>,
        id: RequestId,
        origin: Option<HeaderValue>,
        rate: Option<(HeaderValue, HeaderValue)>,
        bodiless: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<Response>> + Send + 'a>>
    {
        let parent = crate::trace_context::extract(request.headers());
        // For the log line of a request that times out (shares the URI's bytes).
        let (method, uri) = (
            request.method().clone(),
            (!bodiless).then(|| request.uri().clone()),
        );
        let answer = crate::trace_context::within(parent, self.api.handle_as(request, id.clone()));
        Box::pin(async move {
            let response = if bodiless {
                answer.await
            } else {
                let answered = tokio::time::timeout(self.limits.request_timeout, answer).await;
                let Ok(response) = answered else {
                    metrics::counter!(books_core::metrics::REJECTIONS, "reason" => "timeout")
                        .increment(1);
                    let path = uri.as_ref().map_or("", |uri| uri.path());
                    tracing::warn!(request_id = %id, %method, %path, "request timed out; dropping the connection");
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out"));
                };
                response
            };
            Ok(self.finish(response.map(Full::new), origin, rate))
        })
    }

    /// An API route's answer with the CORS and rate-limit fields the request earned.
    fn finish(
        &self,
        mut response: Response,
        origin: Option<HeaderValue>,
        rate: Option<(HeaderValue, HeaderValue)>,
    ) -> Response {
        if self.cors.is_some() {
            Cors::expose(origin, &mut response);
        }
        if let Some((policy, field)) = rate {
            let headers = response.headers_mut();
            headers.insert(RATELIMIT_POLICY, policy);
            headers.insert(RATELIMIT, field);
        }
        response
    }
}

/// What hyper accepts but RFC 9112 does not: an HTTP/1.1 request without `Host` (§3.2),
/// and `chunked` applied more than once (§6.1). A `chunked` that is not last, hyper
/// refuses itself; bare-LF line ends it accepts, as §2.2 allows. (A `bodiless` request
/// has no `chunked` at all: hyper would read a chunked body.)
fn refuse<B>(request: &hyper::Request<B>, bodiless: bool) -> Option<&'static str> {
    // `Host` comes first from nearly every client: found by a walk sooner than by a hash.
    if request.version() == Version::HTTP_11 && !request.headers().keys().any(|name| name == HOST) {
        return Some("A Host header is required.");
    }
    if bodiless {
        return None;
    }
    let chunked = request
        .headers()
        .get_all(TRANSFER_ENCODING)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .filter(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"chunked"))
        .count();
    (chunked > 1).then_some("Transfer-Encoding applies chunked more than once.")
}

/// A place among the API requests in flight, given back when dropped. (A counter rather
/// than tokio's `Semaphore`, whose release takes a lock: nothing ever waits here.)
struct Admitted<'a>(&'a AtomicUsize);

impl<'a> Admitted<'a> {
    /// A place, if fewer than `max` are taken.
    fn try_new(in_flight: &'a AtomicUsize, max: usize) -> Option<Self> {
        in_flight
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(in_flight))
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

const OVERLOADED: &str = "The server is at capacity; retry shortly.";

const RATE_LIMITED: &str =
    "Too many requests from this client; retry after the time Retry-After gives.";
