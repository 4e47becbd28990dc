//! The books API server: `cargo run --release -- --help`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use books_api::{LogFormat, Operations, Options, Traces};
use clap::Parser;
use tokio::net::TcpListener;
use tracing::Level;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() -> ExitCode {
    let options = Options::parse();
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut cause = std::error::Error::source(&error);
            while let Some(error) = cause {
                eprintln!("  caused by: {error}");
                cause = error.source();
            }
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr at `RUST_LOG`'s levels; with `traces`, the core's spans (and warnings
/// and errors, as span events) to the OpenTelemetry exporter too.
fn init_logs(format: LogFormat, traces: Option<&Traces>) {
    // `RUST_LOG` as targets and levels (`info`, `warn,books_core=debug`): tracing's
    // `Targets`, not `EnvFilter`, whose regex engine would double the first build's wait.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(Level::INFO));
    let ansi = std::io::stderr().is_terminal();
    let Some(traces) = traces else {
        // Without export, the subscriber as it always was: nothing more per request.
        // A closed stderr (a log collector gone) must not take requests down: by default
        // the subscriber reports failed writes with `eprintln!`, which panics then.
        let logs = tracing_subscriber::fmt()
            // The builder's own bound is INFO: every level here, `RUST_LOG` decides.
            .with_max_level(tracing::level_filters::LevelFilter::TRACE)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .log_internal_errors(false);
        match format {
            LogFormat::Human => logs.finish().with(filter).init(),
            LogFormat::Json => logs.json().finish().with(filter).init(),
        }
        return;
    };
    // The exporter's layer keeps the API's spans (`DEBUG`, whatever `RUST_LOG` says)
    // and warnings and errors; the log keeps what `RUST_LOG` says.
    let exported = filter_fn(|metadata| {
        if metadata.is_span() {
            metadata.target().starts_with("books_")
        } else {
            *metadata.level() <= Level::WARN
        }
    });
    let spans = tracing_opentelemetry::layer()
        .with_tracer(traces.tracer())
        // No source locations or thread names on every span: the fields say what it is.
        .with_location(false)
        .with_threads(false)
        .with_filter(exported);
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .log_internal_errors(false);
    match format {
        LogFormat::Human => tracing_subscriber::registry()
            .with(spans)
            .with(logs.with_filter(filter))
            .init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(spans)
            .with(logs.json().with_filter(filter))
            .init(),
    }
}

#[tokio::main]
async fn run(options: Options) -> Result<(), books_api::Error> {
    let traces = Traces::from_env(options.otlp_endpoint.as_deref())?;
    init_logs(options.log_format, traces.as_ref());
    let mut clients = options.client_policy()?;
    // Callers' `traceparent` continued while spans are exported; off, nothing is read.
    clients.trace_context = traces.is_some();
    let listener = TcpListener::bind(options.listen).await?;
    let local = listener.local_addr()?;
    let (api, store) = books_api::build_api(&options, local).await?;
    let mut operations = Operations {
        ready_timeout: Duration::from_millis(options.ready_timeout_ms),
        metrics: None,
    };
    if options.metrics {
        let handle = books_api::install_metrics(move || store.pools())?;
        match options.metrics_listen {
            Some(address) => {
                let listener = TcpListener::bind(address).await?;
                let header_timeout = options.limits().header_timeout;
                tokio::spawn(books_api::serve_metrics(listener, handle, header_timeout));
            }
            None => operations.metrics = Some(handle),
        }
    }
    let (prefix, base_url) = (api.config().prefix(), api.config().base_url());
    // On stdout for whoever started it (tests wait for this line), and in the log.
    let _ = writeln!(
        std::io::stdout(),
        "books API listening on http://{local}{prefix} (base URL {base_url})"
    );
    tracing::info!(address = %local, prefix, base_url, "listening");
    if traces.is_some() {
        tracing::info!("exporting traces over OTLP/HTTP");
    }
    let limits = options.limits();
    books_api::serve_with(
        listener,
        api,
        limits,
        operations,
        clients,
        shutdown_signal(),
    )
    .await?;
    if let Some(traces) = traces {
        // What is queued goes out, within a bound: a collector that is gone must not
        // hold the exit.
        let flushed = tokio::task::spawn_blocking(move || traces.shutdown(TRACE_FLUSH));
        let _ = tokio::time::timeout(TRACE_FLUSH + Duration::from_secs(1), flushed).await;
    }
    Ok(())
}

/// How long the spans still queued at shutdown may take to go out.
const TRACE_FLUSH: Duration = Duration::from_secs(5);

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("install SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
