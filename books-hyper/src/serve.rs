//! The connection loop: HTTP/1.1 and HTTP/2 (prior knowledge) through hyper with
//! timeouts and graceful shutdown, each request answered by the handler (`handler.rs`:
//! the server's own refusals, the operator endpoints, CORS, rate limits, shedding, then
//! the API). It served them through the warp binding until a profile put warp's filters
//! and the request it rebuilds at a fifth of a ping's instructions (`scripts/load.py
//! --instructions --workloads ping`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use books_core::BooksApi;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::Operations;
use crate::cors::Cors;
use crate::handler::Handler;
use crate::rate_limit::{Limiter, RateLimit};

/// How an HTTP/2 connection with prior knowledge begins (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the connection's first bytes are HTTP/2's preface (`Some(true)`) or begin
/// anything else (`Some(false)`: HTTP/1.1), looking at them without taking them; `None`
/// when it closes first. Bytes that so far begin the preface (`P`, which `POST` begins
/// too) are looked at again a millisecond later, until they tell.
async fn speaks_h2(stream: &tokio::net::TcpStream) -> Option<bool> {
    let mut first = [0; PREFACE.len()];
    loop {
        let read = stream.peek(&mut first).await.ok()?;
        if read == 0 {
            return None;
        }
        if !PREFACE.starts_with(&first[..read]) {
            return Some(false);
        }
        if read == PREFACE.len() {
            return Some(true);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

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
pub fn serve(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Serving {
    serve_with(
        listener,
        api,
        limits,
        Operations::default(),
        ClientPolicy::default(),
        shutdown,
    )
}

/// [`serve`] with the operator endpoints as `operations` says (e.g. with `/metrics`), and
/// CORS and rate limits as `edge` says.
pub fn serve_with(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    operations: Operations,
    edge: ClientPolicy,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Serving {
    Box::pin(serve_until(
        listener,
        api,
        limits,
        operations,
        edge,
        Box::pin(shutdown),
    ))
}

/// The server's run, until shutdown: boxed here, so that the loop (and hyper's connection
/// code in it) is compiled once, in this crate, and not again in each caller's.
pub type Serving = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

/// How the server treats the API's clients on the open internet before the API answers
/// them: which browser origins may call it, how fast each client may send (neither, by
/// default).
#[derive(Debug, Clone, Default)]
pub struct ClientPolicy {
    /// Browser apps on these origins may call the API.
    pub cors: Option<Cors>,
    /// How fast each client may send API requests (the operator endpoints are never
    /// limited). Per process: N processes behind a balancer let a client N times as much.
    pub rate_limit: Option<RateLimit>,
    /// Continue callers' traces (feature `opentelemetry`): an API request's W3C
    /// `traceparent` and `tracestate`, read by the global OpenTelemetry propagator
    /// (`opentelemetry::global::set_text_map_propagator`), become the parent of the
    /// core's `request` span in a `tracing-opentelemetry` layer. Off by default: off, a
    /// request pays nothing for it.
    #[cfg(feature = "opentelemetry")]
    pub trace_context: bool,
}

async fn serve_until(
    listener: TcpListener,
    api: BooksApi,
    limits: Limits,
    operations: Operations,
    edge: ClientPolicy,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> io::Result<()> {
    let context = Arc::new(Handler {
        in_flight: AtomicUsize::new(0),
        limiter: edge
            .rate_limit
            .as_ref()
            .map(|limit| Arc::new(Limiter::new(limit))),
        cors: edge.cors,
        #[cfg(feature = "opentelemetry")]
        trace_context: edge.trace_context,
        api,
        operations,
        limits,
    });
    let graceful = GracefulShutdown::new();
    // HTTP/1.1, and HTTP/2 with prior knowledge, on the same port: the first bytes of a
    // connection tell which, and each goes straight to hyper's connection for it (no
    // rewinding wrapper around every read). `scripts/load.py --bindings`,
    // `--instructions` and `--http2` measure the loop.
    // An answer's head and body go out in one buffer, one `write`: the kernel takes one
    // buffer for less than two (`writev`), 2–5% of the CPU per answer ("The HTTP/1.1
    // connection").
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .writev(false)
        .max_buf_size(MAX_BUF_SIZE);
    // HTTP/2 has no header timeout: a connection that stops answering pings within the
    // header timeout is closed instead.
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.header_timeout)
        .keep_alive_timeout(limits.header_timeout)
        .max_header_list_size(MAX_BUF_SIZE as u32)
        .max_concurrent_streams(MAX_STREAMS);
    let _tick = Housekeeping::start(context.limiter.clone());
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
        let (http1, http2, watcher) = (http1.clone(), http2.clone(), graceful.watcher());
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            // The first bytes (which protocol?) within the header timeout: a client that
            // connects and sends nothing is dropped then, as HTTP/1.1's header timeout
            // does later on.
            let Ok(Some(h2)) = tokio::time::timeout(header_timeout, speaks_h2(&stream)).await
            else {
                return;
            };
            // HTTP/2 answers each stream in a task of its own, which the answer's future is
            // moved into: boxed, a pointer is moved (the future is kilobytes; bare hyper
            // with a 2.9 KB future answered a tenth fewer pings). HTTP/1.1 answers in the
            // connection's task, where a box would be an allocation more per request
            // (cached reads 0.93x).
            let ended = if h2 {
                let handler = service_fn(move |request: hyper::Request<Incoming>| {
                    Box::pin(context.clone().answer(peer, request))
                });
                watcher
                    .watch(http2.serve_connection(TokioIo::new(stream), handler))
                    .await
            } else {
                let handler = service_fn(move |request: hyper::Request<Incoming>| {
                    context.clone().answer(peer, request)
                });
                watcher
                    .watch(http1.serve_connection(TokioIo::new(stream), handler))
                    .await
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

/// The server's housekeeping, a task that runs once a second while it serves: it sweeps
/// the rate limiter's idle clients, and keeps a timer always pending within a second.
///
/// That timer matters on its own: tokio's time driver wakes itself through its eventfd
/// (a `write(2)` and one more turn of `epoll_wait`) whenever a timer is set and no
/// earlier one is pending, even on the thread that is running tasks
/// (tokio-rs/tokio#5207). Exact mode's version check sets one per wave and hyper's
/// header timeout one per request, and between waves no other timer is pending: a third
/// of a system call per cached read (`strace -c` on the server under `scripts/load.py`). With the
/// tick pending, every longer timer is set without a wake.
struct Housekeeping(tokio::task::JoinHandle<()>);

impl Housekeeping {
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

impl Drop for Housekeeping {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Streams one HTTP/2 connection may have open at once (each is a request in flight,
/// which the in-flight bound counts too).
const MAX_STREAMS: u32 = 128;
