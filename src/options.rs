//! Command-line flags, each with an environment-variable fallback.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use books_core::{Config, RouteScheme};
use clap::{Parser, ValueEnum};

/// The example server's configuration.
#[derive(Debug, Clone, Parser)]
#[command(name = "server", version, about = "Runs the books API on warp.")]
pub struct Options {
    /// Address and port to listen on.
    #[arg(long, env = "BOOKS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Absolute URL that links and `Location` headers start with
    /// [default: `http://` + the listen address, with `localhost` for 0.0.0.0 or ::].
    #[arg(long, env = "BOOKS_BASE_URL")]
    pub base_url: Option<String>,

    /// Where books live: `sqlite://FILE`, `sqlite::memory:`, `postgres://…`, or `memory`
    /// (in-memory store). Migrations run at start; an empty database gets demo data.
    #[arg(long, env = "BOOKS_DATABASE_URL", default_value = "sqlite://books.db")]
    pub database_url: String,

    /// Route names to serve: `index` (/books/{id}), `action` (/books/update/{id}) or `both`.
    #[arg(long, env = "BOOKS_ROUTE_SCHEME", default_value = "both")]
    pub route_scheme: RouteScheme,

    /// Whether ping also reports `time` and `version`.
    #[arg(long, env = "BOOKS_EXTENDED_PING", default_value_t = true, action = clap::ArgAction::Set)]
    pub extended_ping: bool,

    /// Whether `{prefix}/openapi.json` serves the API's OpenAPI 3.1 document.
    #[arg(long, env = "BOOKS_OPENAPI", default_value_t = true, action = clap::ArgAction::Set)]
    pub openapi: bool,

    /// Books per page.
    #[arg(long, env = "BOOKS_PAGE_SIZE", default_value = "20")]
    pub page_size: NonZeroU32,

    /// Largest request body in bytes (larger ones get 413).
    #[arg(long, env = "BOOKS_BODY_LIMIT", default_value_t = 64 * 1024)]
    pub body_limit: usize,

    /// If set, POST, PUT and DELETE need `Authorization: Bearer <token>` (401 otherwise).
    #[arg(long, env = "BOOKS_WRITE_TOKEN", hide_env_values = true)]
    pub write_token: Option<String>,

    /// Log lines as human-readable text or JSON (level from RUST_LOG, default info).
    #[arg(long, env = "BOOKS_LOG_FORMAT", value_enum, default_value = "human")]
    pub log_format: LogFormat,

    /// Seconds a client may take to send a request's headers (also the keep-alive idle limit).
    #[arg(long, env = "BOOKS_HEADER_TIMEOUT", default_value = "10")]
    pub header_timeout: u64,

    /// Seconds a whole request may take, body included, before its connection is dropped.
    #[arg(long, env = "BOOKS_REQUEST_TIMEOUT", default_value = "30")]
    pub request_timeout: u64,

    /// Seconds in-flight requests get to finish after SIGINT or SIGTERM.
    #[arg(long, env = "BOOKS_SHUTDOWN_GRACE", default_value = "30")]
    pub shutdown_grace: u64,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    Human,
    /// One JSON object per event.
    Json,
}

impl Options {
    /// The API configuration for a server bound to `local`.
    pub fn config(&self, local: SocketAddr) -> Config {
        let base_url = self.base_url.clone().unwrap_or_else(|| {
            let host = match local.ip() {
                ip if ip.is_unspecified() => "localhost".to_owned(),
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            format!("http://{host}:{}", local.port())
        });
        Config::default()
            .with_base_url(&base_url)
            .with_route_scheme(self.route_scheme)
            .with_extended_ping(self.extended_ping)
            .with_page_size(self.page_size)
            .with_body_limit(self.body_limit)
            .with_write_token(self.write_token.as_deref())
            .with_openapi(self.openapi)
    }

    /// The server's timeouts.
    pub fn limits(&self) -> crate::Limits {
        crate::Limits {
            header_timeout: Duration::from_secs(self.header_timeout),
            request_timeout: Duration::from_secs(self.request_timeout),
            shutdown_grace: Duration::from_secs(self.shutdown_grace),
        }
    }
}
