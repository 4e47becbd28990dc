//! The connection loop: HTTP/1.1 and HTTP/2 (prior knowledge) through hyper with
//! timeouts, request ids, a bound on requests in flight, the operator endpoints, CORS,
//! per-client rate limits and graceful shutdown, handing the API's requests to the core
//! (`BooksApi::handle_as`) as they come. (It served them through
//! the warp binding until a profile put warp's filters and the request it rebuilds at
//! a fifth of a ping's instructions: BENCHMARKS.md, "The server's fixed cost".)

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use books_core::{BooksApi, REQUEST_ID, RequestId};
use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HOST, HeaderValue, RETRY_AFTER, TRANSFER_ENCODING};
use http::{StatusCode, Version};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::Operations;
use crate::cors::Cors;
use crate::rate_limit::{Limiter, RATELIMIT, RATELIMIT_POLICY, RateLimit, Verdict};

/// What the connection loop answers with.
pub(crate) type Response = http::Response<Full<Bytes>>;

/// How an HTTP/2 connection with prior knowledge begins (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Largest per-connection read buffer: caps memory per connection whatever a client sends.
const MAX_BUF_SIZE: usize = 16 * 1024;

/// The server's time limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to receive a request's headers (and a new connection's first bytes); also how
    /// long an idle HTTP/1.1 keep-alive connection lives, and how long an HTTP/2
    /// connection may leave a ping unanswered.
    pub header_timeout: Duration,
    /// Time for a whole request that has a body, body included; past it the connection is
    /// dropped. (A request without a body cannot stall on its client, and the stores
    /// bound their own waits.)
    pub request_timeout: Duration,
    /// Time in-flight requests get to finish once shutdown starts.
    pub shutdown_grace: Duration,
    /// API requests answered at once; past it a request gets 503 with `Retry-After`
    /// at once instead of a place in a queue (the operator endpoints are never refused).
    pub max_in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            max_in_flight: 256,
        }
    }
}

/// Serves `api` on `listener` with [`/livez` and `/readyz`](Operations) until `shutdown`
/// resolves, then stops accepting and waits up to `limits.shutdown_grace` for in-flight
/// requests to finish.
pub async fn serve(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with(
        listener,
        api,
        limits,
        Operations::default(),
        Edge::default(),
        shutdown,
    )
    .await
}

/// [`serve`] with the operator endpoints as `operations` says (e.g. with `/metrics`), and
/// CORS and rate limits as `edge` says.
pub async fn serve_with(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    operations: Operations,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    // One loop for every caller: generic over the shutdown future, the whole loop (and
    // hyper's connection code in it) would be compiled again in each crate that calls
    // it (BENCHMARKS.md, "First build").
    serve_until(listener, api, limits, operations, edge, Box::pin(shutdown)).await
}

/// What the server does for clients on the open internet before the API answers
/// (nothing by default).
#[derive(Debug, Clone, Default)]
pub struct Edge {
    /// Browser apps on these origins may call the API.
    pub cors: Option<Cors>,
    /// How fast each client may send API requests (the operator endpoints are never
    /// limited). Per process: N processes behind a balancer let a client N times as much.
    pub rate_limit: Option<RateLimit>,
}

async fn serve_until(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    operations: Operations,
    edge: Edge,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> io::Result<()> {
    let context = Arc::new(Context {
        in_flight: AtomicUsize::new(0),
        limiter: edge
            .rate_limit
            .as_ref()
            .map(|limit| Arc::new(Limiter::new(limit))),
        cors: edge.cors,
        api,
        operations,
        limits,
    });
    let graceful = GracefulShutdown::new();
    // HTTP/1.1, and HTTP/2 with prior knowledge, on the same port: the first bytes of a
    // connection tell which. A connection whose first bytes cannot begin HTTP/2's preface
    // goes straight to hyper's HTTP/1.1 connection; the auto builder, which reads the
    // first bytes itself and then serves through a rewinding wrapper, takes the rest
    // (BENCHMARKS.md, "The HTTP/1.1 connection").
    // An answer's head and body go out in one buffer, one `write`: the kernel takes one
    // buffer for less than two (`writev`), 2–5% of the CPU per answer ("The HTTP/1.1
    // connection").
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .writev(false)
        .max_buf_size(MAX_BUF_SIZE);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .writev(false)
        .max_buf_size(MAX_BUF_SIZE);
    // HTTP/2 has no header timeout: a connection that stops answering pings within the
    // header timeout is closed instead.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.header_timeout)
        .keep_alive_timeout(limits.header_timeout)
        .max_header_list_size(MAX_BUF_SIZE as u32)
        .max_concurrent_streams(MAX_STREAMS);
    let _tick = Tick::start(context.limiter.clone());
    let mut shutdown = shutdown;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let context = context.clone();
        let handler = service_fn(move |request: hyper::Request<Incoming>| {
            context.clone().answer(peer, request)
        });
        let (http1, builder, watcher) = (http1.clone(), builder.clone(), graceful.watcher());
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            // The first bytes (which protocol?) within the header timeout: a client that
            // connects and sends nothing is dropped then, as HTTP/1.1's header timeout
            // does later on.
            let mut first = [0; PREFACE.len()];
            let read = match tokio::time::timeout(header_timeout, stream.peek(&mut first)).await {
                Ok(Ok(read)) if read > 0 => read,
                _ => return,
            };
            let ended = if PREFACE.starts_with(&first[..read]) {
                watcher
                    .watch(builder.serve_connection(TokioIo::new(stream), handler))
                    .await
            } else {
                watcher
                    .watch(http1.serve_connection(TokioIo::new(stream), handler))
                    .await
                    .map_err(Into::into)
            };
            if let Err(error) = ended {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: waiting for in-flight requests");
    if tokio::time::timeout(context.limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period over; closing the remaining connections");
    }
    Ok(())
}

/// The server's task that runs once a second while it serves: it sweeps the rate
/// limiter's idle clients, and keeps a timer always pending within a second.
///
/// That timer matters on its own: tokio's time driver wakes itself through its eventfd
/// (a `write(2)` and one more turn of `epoll_wait`) whenever a timer is set and no
/// earlier one is pending, even on the thread that is running tasks
/// (tokio-rs/tokio#5207). Exact mode's version check sets one per wave and hyper's
/// header timeout one per request, and between waves no other timer is pending: a third
/// of a system call per cached read (BENCHMARKS.md, "The end of issue 23"). With the
/// tick pending, every longer timer is set without a wake.
struct Tick(tokio::task::JoinHandle<()>);

impl Tick {
    fn start(limiter: Option<Arc<Limiter>>) -> Self {
        Self(tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                if let Some(limiter) = &limiter {
                    limiter.sweep();
                }
            }
        }))
    }
}

impl Drop for Tick {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Streams one HTTP/2 connection may have open at once (each is a request in flight,
/// which the in-flight bound counts too).
const MAX_STREAMS: u32 = 128;

/// What every request of every connection shares.
struct Context {
    api: BooksApi,
    operations: Operations,
    limits: Limits,
    /// API requests being answered (bounded by `limits.max_in_flight`).
    in_flight: AtomicUsize,
    cors: Option<Cors>,
    limiter: Option<Arc<Limiter>>,
}

impl Context {
    /// The answer to one request from `peer`: the loop's own refusals, the operator
    /// endpoints, CORS preflights, rate limits and shedding, then the API.
    async fn answer(
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
            let mut response = problem(StatusCode::BAD_REQUEST, refused, &id);
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            return Ok(response);
        }
        if self.operations.owns(path) {
            let mut response = self.operations.answer(&method, path, &self.api).await;
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
                    books_core::metrics::rejected("rate_limit");
                    tracing::debug!(request_id = %id, %method, %path, %client, "rate limited");
                    let mut response = problem(StatusCode::TOO_MANY_REQUESTS, RATE_LIMITED, &id);
                    let headers = response.headers_mut();
                    headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
                    headers.insert(RATELIMIT_POLICY, limiter.policy().clone());
                    headers.insert(RATELIMIT, field);
                    return Ok(self.finish(response, origin, None));
                }
            }
        }
        let Some(_admitted) = Admitted::try_new(&self.in_flight, self.limits.max_in_flight) else {
            books_core::metrics::rejected("overload");
            tracing::debug!(request_id = %id, %method, %path, "shed: too many requests in flight");
            let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, OVERLOADED, &id);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(self.finish(response, origin, rate));
        };
        // Only a request with a body can stall on its client: the others are bounded by
        // the store's own waits, and skip the timer (a fifteenth of a ping's
        // instructions).
        if bodiless {
            let response = self.api.handle_as(request, id).await;
            return Ok(self.finish(response.map(Full::new), origin, rate));
        }
        let answer = self.api.handle_as(request, id.clone());
        let answered = tokio::time::timeout(self.limits.request_timeout, answer).await;
        let Ok(response) = answered else {
            books_core::metrics::rejected("timeout");
            let path = uri.as_ref().map_or("", |uri| uri.path());
            tracing::warn!(request_id = %id, %method, %path, %peer, "request timed out; dropping the connection");
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out"));
        };
        Ok(self.finish(response.map(Full::new), origin, rate))
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

/// A problem the connection loop answers itself, before the API (JSON: there is no
/// negotiation this early), with the request's id as in the API's own problems.
fn problem(status: StatusCode, detail: &'static str, id: &RequestId) -> Response {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "detail": detail,
        "instance": format!("urn:request:{id}"),
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(REQUEST_ID, id.header_value().clone());
    response
}
