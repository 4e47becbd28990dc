//! What an operator asks the server outside the API: `/livez`, `/readyz` and `/metrics`.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use books_core::store::{StoreError, Unready};
use books_core::{BooksApi, ErrorChain, LogThrottle};
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Method, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::response::{Response, text};

/// Liveness: answers 200 while the process serves requests at all.
pub const LIVEZ: &str = "/livez";
/// Readiness: 200 (`ready: …`) when the store answers within the timeout and takes
/// writes, 503 with `Retry-After` otherwise, the body naming why: `not ready: read-only`
/// (its servers answer but none takes writes: a failover under way, a standby) or
/// `not ready: unreachable`. A load balancer sends traffic only on 200.
pub const READYZ: &str = "/readyz";
/// Prometheus metrics, when they are served on the API's own address.
pub const METRICS: &str = "/metrics";

/// The Prometheus text exposition format.
const PROMETHEUS_TEXT: HeaderValue = HeaderValue::from_static("text/plain; version=0.0.4");

/// What renders the process's metrics in Prometheus' text format (a
/// `metrics-exporter-prometheus` handle's `render`, say).
pub type RenderMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// What the server answers beside the API.
#[derive(Clone)]
pub struct Operations {
    /// How long readiness waits for the store before answering 503.
    pub ready_timeout: Duration,
    /// Metrics to serve at [`METRICS`] on the API's address (`None`: not there).
    pub metrics: Option<RenderMetrics>,
}

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operations")
            .field("ready_timeout", &self.ready_timeout)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl Default for Operations {
    fn default() -> Self {
        Self {
            ready_timeout: Duration::from_secs(2),
            metrics: None,
        }
    }
}

impl Operations {
    /// Whether `path` is one of these endpoints (they are never shed or timed out).
    pub fn owns(&self, path: &str) -> bool {
        path == LIVEZ || path == READYZ || (path == METRICS && self.metrics.is_some())
    }

    /// The answer for one of [`owns`](Self::owns)'s paths.
    pub async fn answer(&self, method: &Method, path: &str, api: &BooksApi) -> Response {
        if method != Method::GET && method != Method::HEAD {
            let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            let allow = HeaderValue::from_static("GET, HEAD");
            response.headers_mut().insert(http::header::ALLOW, allow);
            return response;
        }
        match path {
            READYZ => match tokio::time::timeout(self.ready_timeout, api.ready()).await {
                Ok(Ok(())) => text(
                    StatusCode::OK,
                    "ready: the store answers and takes writes\n",
                ),
                outcome => {
                    let (why, state) = match &outcome {
                        Ok(Err(error)) => (ErrorChain(error).to_string(), state(error)),
                        _ => ("timed out".to_owned(), "unreachable"),
                    };
                    static NOT_READY: LogThrottle = LogThrottle::new(Duration::from_secs(5));
                    if let Some(held_back) = NOT_READY.allow() {
                        tracing::warn!(error = %why, held_back, "not ready: the store does not answer");
                    }
                    let body = format!("not ready: {state}\n");
                    let mut response = text(StatusCode::SERVICE_UNAVAILABLE, body);
                    let retry = HeaderValue::from_static("1");
                    response.headers_mut().insert(RETRY_AFTER, retry);
                    response
                }
            },
            METRICS => {
                let body = self.metrics.as_ref().map(|render| render());
                let mut response = text(StatusCode::OK, body.unwrap_or_default());
                response.headers_mut().insert(CONTENT_TYPE, PROMETHEUS_TEXT);
                response
            }
            _ => text(StatusCode::OK, "ok\n"),
        }
    }
}

/// What `/readyz` says of a store that does not answer: `read-only` while its servers
/// answer but none takes writes (a failover under way), else `unreachable`.
fn state(error: &StoreError) -> &'static str {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(Unready::WrongRole(_)) = error.downcast_ref::<Unready>() {
            return "read-only";
        }
        cause = error.source();
    }
    "unreachable"
}

/// Answers every request on `listener` with the metrics (any path, like Prometheus
/// exporters' own listeners), dropping a client that sends no headers within
/// `header_timeout` (the API's, [`Limits::header_timeout`](crate::Limits::header_timeout)).
pub async fn serve_metrics(
    listener: TcpListener,
    render: RenderMetrics,
    header_timeout: Duration,
) -> io::Result<()> {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    loop {
        let (stream, _) = listener.accept().await?;
        let render = render.clone();
        let service = service_fn(move |_: hyper::Request<Incoming>| {
            let mut response = text(StatusCode::OK, render());
            response.headers_mut().insert(CONTENT_TYPE, PROMETHEUS_TEXT);
            std::future::ready(Ok::<_, Infallible>(response))
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}
