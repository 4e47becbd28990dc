//! The books API server: `cargo run --release -- --help`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use books_api::{LogFormat, Operations, Options};
use clap::Parser;
use tokio::net::TcpListener;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() -> ExitCode {
    let options = Options::parse();
    // `RUST_LOG` as targets and levels (`info`, `warn,books_core=debug`): tracing's
    // `Targets`, not `EnvFilter`, whose regex engine would double the first build's wait.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(Level::INFO));
    // A closed stderr (a log collector gone) must not take requests down: by default the
    // subscriber reports failed writes with `eprintln!`, which panics then.
    let logs = tracing_subscriber::fmt()
        // The builder's own bound is INFO: every level here, `RUST_LOG` decides.
        .with_max_level(tracing::level_filters::LevelFilter::TRACE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false);
    match options.log_format {
        LogFormat::Human => logs.finish().with(filter).init(),
        LogFormat::Json => logs.json().finish().with(filter).init(),
    }
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

#[tokio::main]
async fn run(options: Options) -> Result<(), books_api::Error> {
    let clients = options.client_policy()?;
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
    Ok(())
}

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
