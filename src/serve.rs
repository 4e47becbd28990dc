//! The connection loop: HTTP/1.1 through hyper with timeouts, request logs and graceful
//! shutdown (`warp::serve` sets no header-read timer, so this loop replaces it).

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use books_core::BooksApi;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower_service::Service;
use warp::http::header::{CONNECTION, CONTENT_TYPE, HOST, HeaderValue, TRANSFER_ENCODING};
use warp::http::{StatusCode, Version};

/// Largest per-connection read buffer: caps memory per connection whatever a client sends.
const MAX_BUF_SIZE: usize = 16 * 1024;

/// The server's time limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to receive a request's headers; also how long an idle keep-alive connection lives.
    pub header_timeout: Duration,
    /// Time for a whole request, body included; past it the connection is dropped.
    pub request_timeout: Duration,
    /// Time in-flight requests get to finish once shutdown starts.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// Serves `api` on `listener` until `shutdown` resolves, then stops accepting and waits
/// up to `limits.shutdown_grace` for in-flight requests to finish.
pub async fn serve(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let service = warp::service(books_warp::routes(api));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_BUF_SIZE);
    tokio::pin!(shutdown);
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
        let service = service.clone();
        let handler = service_fn(move |request: hyper::Request<Incoming>| {
            let mut service = service.clone();
            async move {
                let started = Instant::now();
                let method = request.method().clone();
                let path = request.uri().path().to_owned();
                if let Some(refused) = refuse(&request) {
                    tracing::info!(%method, %path, status = 400, detail = refused, "refused");
                    return Ok(bad_request(refused));
                }
                let answered = tokio::time::timeout(limits.request_timeout, service.call(request));
                let Ok(Ok(response)) = answered.await else {
                    tracing::warn!(%method, %path, %peer, "request timed out; dropping the connection");
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "request timed out"));
                };
                tracing::info!(
                    %method,
                    %path,
                    status = response.status().as_u16(),
                    latency_us = started.elapsed().as_micros() as u64,
                    "request"
                );
                Ok::<_, io::Error>(response)
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

/// A 400 the connection loop gives before any routing (a problem body in JSON), closing
/// the connection: the request's framing is not to be trusted.
fn bad_request(detail: &'static str) -> warp::reply::Response {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": detail,
    });
    let mut response = warp::reply::Response::new(body.to_string().into());
    *response.status_mut() = StatusCode::BAD_REQUEST;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}
