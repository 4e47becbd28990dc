//! The books API on warp: `cargo run --release --example server -- --help`.

use books_api::{LogFormat, Options};
use clap::Parser;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), books_api::Error> {
    let options = Options::parse();
    let logs = tracing_subscriber::fmt().with_env_filter(
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    );
    match options.log_format {
        LogFormat::Human => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let listener = TcpListener::bind(options.listen).await?;
    let local = listener.local_addr()?;
    let api = books_api::build_api(&options, local).await?;
    println!(
        "books API listening on http://{local}{} (base URL {})",
        api.config().prefix(),
        api.config().base_url()
    );
    books_api::serve(listener, api, options.limits(), shutdown_signal()).await?;
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
