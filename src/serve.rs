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
