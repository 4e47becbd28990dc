//! The books API server: `cargo run --release -- --help`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use books_api::{LogFormat, Operations, Options};
use clap::Parser;
use tokio::net::TcpListener;

fn main() -> ExitCode {
    let options = Options::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match options.log_format {
        LogFormat::Human => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let mut causes = books_api::causes(&error);
            if let Some(error) = causes.next() {
                eprintln!("error: {error}");
            }
            for cause in causes {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn run(options: Options) -> Result<(), books_api::Error> {
    let listener = TcpListener::bind(options.listen).await?;
    let local = listener.local_addr()?;
    let (api, store) = books_api::build_api(&options, local).await?;
    let mut operations = Operations {
        ready_timeout: Duration::from_millis(options.ready_timeout_ms),
        metrics: None,
    };
    if options.metrics {
        let handle = books_api::install_metrics(options.metrics_listen, store)?;
        if options.metrics_listen.is_none() {
            operations.metrics = Some(handle);
        }
    }
    println!(
        "books API listening on http://{local}{} (base URL {})",
        api.config().prefix(),
        api.config().base_url()
    );
    let limits = options.limits();
    books_api::serve_with(listener, api, limits, operations, shutdown_signal()).await?;
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
