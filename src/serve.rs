//! The connection loop: HTTP/1.1 through hyper with timeouts, request ids, a bound on
//! requests in flight, the operator endpoints and graceful shutdown, handing the API's
//! requests to the core (`BooksApi::handle_as`) as they come. (It served them through
//! the warp binding until a profile put warp's filters and the request it rebuilds at
//! a fifth of a ping's instructions: BENCHMARKS.md, "The server's fixed cost".)

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use books_core::{BooksApi, REQUEST_ID, RequestId};
use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HOST, HeaderValue, RETRY_AFTER, TRANSFER_ENCODING};
use http::{StatusCode, Version};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::Operations;

/// What the connection loop answers with.
pub(crate) type Response = http::Response<Full<Bytes>>;

/// Largest per-connection read buffer: caps memory per connection whatever a client sends.
const MAX_BUF_SIZE: usize = 16 * 1024;

/// The server's time limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to receive a request's headers; also how long an idle keep-alive connection lives.
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
    serve_with(listener, api, limits, Operations::default(), shutdown).await
}

/// [`serve`] with the operator endpoints as `operations` says (e.g. with `/metrics`).
pub async fn serve_with(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    operations: Operations,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    // One loop for every caller: generic over the shutdown future, the whole loop (and
    // hyper's connection code in it) would be compiled again in each crate that calls
    // it (BENCHMARKS.md, "First build").
    serve_until(listener, api, limits, operations, Box::pin(shutdown)).await
}

async fn serve_until(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    operations: Operations,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> io::Result<()> {
    let admission = Arc::new(Semaphore::new(limits.max_in_flight));
    let operations = Arc::new(operations);
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_BUF_SIZE);
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
        let (api, operations, admission) = (api.clone(), operations.clone(), admission.clone());
        let handler = service_fn(move |request: hyper::Request<Incoming>| {
            let (api, operations, admission) = (api.clone(), operations.clone(), admission.clone());
            async move {
                // One id for the request's log lines here and in the API, and its answer.
                let id = RequestId::from_headers(request.headers());
                let method = request.method().clone();
                // For the log lines after the request is handed on (shares its bytes).
                let uri = request.uri().clone();
                let path = uri.path();
                if let Some(refused) = refuse(&request) {
                    tracing::info!(request_id = %id, %method, %path, detail = refused, "refused");
                    let mut response = problem(StatusCode::BAD_REQUEST, refused, &id);
                    response
                        .headers_mut()
                        .insert(CONNECTION, HeaderValue::from_static("close"));
                    return Ok(response);
                }
                if operations.owns(path) {
                    let mut response = operations.answer(&method, path, &api).await;
                    response
                        .headers_mut()
                        .insert(REQUEST_ID, id.header_value().clone());
                    return Ok(response);
                }
                let Ok(_admitted) = admission.try_acquire_owned() else {
                    books_core::metrics::rejected("overload");
                    tracing::debug!(request_id = %id, %method, %path, "shed: too many requests in flight");
                    let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, OVERLOADED, &id);
                    response
                        .headers_mut()
                        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
                    return Ok(response);
                };
                // Only a request with a body can stall on its client: the others are
                // bounded by the store's own waits, and skip the timer (a fifteenth of a
                // ping's instructions).
                let bodiless = request.body().is_end_stream();
                let answer = api.handle_as(request, id.clone());
                let answered = if bodiless {
                    Ok(answer.await)
                } else {
                    tokio::time::timeout(limits.request_timeout, answer).await
                };
                let Ok(response) = answered else {
                    books_core::metrics::rejected("timeout");
                    tracing::warn!(request_id = %id, %method, %path, %peer, "request timed out; dropping the connection");
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out"));
                };
                Ok::<_, io::Error>(response.map(Full::new))
            }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), handler);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: waiting for in-flight requests");
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period over; closing the remaining connections");
    }
    Ok(())
}

/// What hyper accepts but RFC 9112 does not: an HTTP/1.1 request without `Host` (§3.2),
/// and `chunked` applied more than once (§6.1). A `chunked` that is not last, hyper
/// refuses itself; bare-LF line ends it accepts, as §2.2 allows.
fn refuse<B>(request: &hyper::Request<B>) -> Option<&'static str> {
    if request.version() == Version::HTTP_11 && !request.headers().contains_key(HOST) {
        return Some("A Host header is required.");
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

const OVERLOADED: &str = "The server is at capacity; retry shortly.";

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
