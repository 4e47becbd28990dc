//! Command-line flags, each with an environment-variable fallback (and, for the listen
//! address and the database, the conventional `PORT` and `DATABASE_URL` after that).

use std::net::{IpAddr, SocketAddr};
use std::num::{NonZeroU32, NonZeroUsize};
use std::time::Duration;

use books_core::{CacheControl, CacheLimits, Config, RouteScheme};
use clap::{Parser, ValueEnum};
use ipnet::IpNet;

/// The example server's configuration.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "books-api",
    version,
    about = "Runs the books API on hyper.",
    after_help = "Flags win over environment variables. Without --listen or BOOKS_LISTEN, \
                  PORT (as platforms set it) means 0.0.0.0:$PORT; without --database-url or \
                  BOOKS_DATABASE_URL, DATABASE_URL is used."
)]
pub struct Options {
    /// Address and port to listen on [default: 0.0.0.0:$PORT if PORT is set, else 127.0.0.1:8080].
    #[arg(long, env = "BOOKS_LISTEN", default_value_t = default_listen(), hide_default_value = true)]
    pub listen: SocketAddr,

    /// Absolute URL that links and `Location` headers start with
    /// [default: `http://` + the listen address, with `localhost` for 0.0.0.0 or ::].
    #[arg(long, env = "BOOKS_BASE_URL")]
    pub base_url: Option<String>,

    /// Where books live: `sqlite://FILE`, `sqlite::memory:`, `postgres://…`, `mysql://…`
    /// (MariaDB; `mariadb://…` too), or `memory` (in-memory store). A cluster is several
    /// hosts, as libpq writes them (`postgres://user@h1:5432,h2:5432/books?target_session_attrs=read-write`,
    /// `mysql://user@n1:3306,n2:3306/books`): writes go to the first host that takes
    /// them, found again after a failover. Migrations run at start, there; an empty
    /// database gets demo data
    /// [default: $DATABASE_URL if set, else sqlite://books.db].
    #[arg(
        long,
        env = "BOOKS_DATABASE_URL",
        default_value_t = default_database_url(),
        hide_default_value = true,
        hide_env_values = true
    )]
    pub database_url: String,

    /// PostgreSQL: `true` turns push mode on for the database and listens: cached reads
    /// ask the database nothing, and may lag a write made elsewhere by about one round
    /// trip; every write to the database, whoever makes it, then commits one at a time.
    /// `false` turns it off for the database. Unset: this process stays exact and leaves
    /// the database as it is.
    #[arg(long, env = "BOOKS_PUSH", action = clap::ArgAction::Set)]
    pub push: Option<bool>,

    /// PostgreSQL: the database URL is a transaction-mode pooler's (PgBouncer with
    /// `pool_mode = transaction`, a managed pooler): no named statements, the statement
    /// time bound per transaction, migrations in one transaction through it.
    #[arg(long, env = "BOOKS_TRANSACTION_POOLER", default_value_t = false, action = clap::ArgAction::Set)]
    pub transaction_pooler: bool,

    /// PostgreSQL: a direct URL of the primary for push mode's `LISTEN`, which a
    /// transaction pooler cannot carry (needed with --push true behind one).
    #[arg(long, env = "BOOKS_NOTIFY_URL", hide_env_values = true)]
    pub notify_url: Option<String>,

    /// PostgreSQL or MariaDB: a replica (streaming; GTID) to read pages and books from once
    /// it has applied the primary's position as the read began (never older than the
    /// primary).
    /// Repeatable; the variable takes a comma-separated list.
    #[arg(
        long = "replica-url",
        env = "BOOKS_REPLICA_URLS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub replica_urls: Vec<String>,

    /// PostgreSQL or MariaDB: seconds to wait at start for a host of the database URL
    /// with the role it asks for, by default one that takes writes (a failover under
    /// way, a cluster starting), asking again every
    /// 250 ms, before exiting with what each host was found to be (0: ask once).
    #[arg(long, env = "BOOKS_PRIMARY_WAIT", default_value = "30")]
    pub primary_wait: u64,

    /// Milliseconds a read waits for a replica to catch up before the primary answers it.
    #[arg(long, env = "BOOKS_REPLICA_WAIT_MS", default_value_t = books_sqlx::DEFAULT_REPLICA_WAIT.as_millis() as u64)]
    pub replica_wait_ms: u64,

    /// Route names to serve: `index` (/books/{id}), `action` (/books/update/{id}) or `both`.
    #[arg(long, env = "BOOKS_ROUTE_SCHEME", default_value = "both")]
    pub route_scheme: RouteScheme,

    /// Whether ping also reports `time` and `version`. On here (an operator looking at a
    /// running server wants both), off in the library's `Config::default()` (the
    /// contract's plain ping, until the embedding chooses).
    #[arg(long, env = "BOOKS_EXTENDED_PING", default_value_t = true, action = clap::ArgAction::Set)]
    pub extended_ping: bool,

    /// Whether `{prefix}/openapi.json` serves the API's OpenAPI 3.1 document.
    #[arg(long, env = "BOOKS_OPENAPI", default_value_t = true, action = clap::ArgAction::Set)]
    pub openapi: bool,

    /// Whether `{prefix}/docs` serves the interactive reference page (Swagger UI over the
    /// OpenAPI document, its assets served from here; needs --openapi true).
    #[arg(long, env = "BOOKS_DOCS", default_value_t = true, action = clap::ArgAction::Set)]
    pub docs: bool,

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

    /// Seconds a request with a body may take, body included, before its connection is
    /// dropped (a request without one cannot stall on its client).
    #[arg(long, env = "BOOKS_REQUEST_TIMEOUT", default_value = "30")]
    pub request_timeout: u64,

    /// Seconds in-flight requests get to finish after SIGINT or SIGTERM.
    #[arg(long, env = "BOOKS_SHUTDOWN_GRACE", default_value = "30")]
    pub shutdown_grace: u64,

    /// API requests answered at once; beyond it, 503 with Retry-After at once (shed, not queued).
    #[arg(long, env = "BOOKS_MAX_IN_FLIGHT", default_value = "256")]
    pub max_in_flight: NonZeroUsize,

    /// Milliseconds `/readyz` waits for the database before answering 503.
    #[arg(long, env = "BOOKS_READY_TIMEOUT_MS", default_value = "2000")]
    pub ready_timeout_ms: u64,

    /// Rendered book and page answers kept for reuse while the data is unchanged (0: off).
    #[arg(long, env = "BOOKS_CACHE_ENTRIES", default_value_t = CacheLimits::default().entries)]
    pub cache_entries: usize,

    /// Body bytes the cache of rendered answers and compressed bodies may hold.
    #[arg(long, env = "BOOKS_CACHE_BYTES", default_value_t = CacheLimits::default().bytes)]
    pub cache_bytes: usize,

    /// What `Cache-Control` tells browsers and shared caches about books and pages:
    /// `no-cache` (revalidate with the ETag before every use: exact behind any cache) or
    /// `max-age=N` (reuse for N seconds: up to N seconds stale).
    #[arg(long, env = "BOOKS_CACHE_CONTROL", default_value = "no-cache")]
    pub cache_control: CacheControl,

    /// Whether PUT and DELETE of a book need `If-Match` (428 Precondition Required without).
    #[arg(long, env = "BOOKS_REQUIRE_IF_MATCH", default_value_t = false, action = clap::ArgAction::Set)]
    pub require_if_match: bool,

    /// Seconds an `Idempotency-Key` is kept after its create (a replay within it answers
    /// the same; after it the key may be used afresh).
    #[arg(long, env = "BOOKS_IDEMPOTENCY_TTL", default_value = "86400")]
    pub idempotency_ttl: u64,

    /// Whether Prometheus metrics are recorded and served (`/metrics`).
    #[arg(long, env = "BOOKS_METRICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics: bool,

    /// Serve `/metrics` on this address instead of the API's (any path answers there).
    #[arg(long, env = "BOOKS_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Export traces over OTLP/HTTP (protobuf) to this collector's base URL
    /// (`http://localhost:4318`: spans go to `/v1/traces`), and continue callers'
    /// `traceparent`. The standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `_TRACES_ENDPOINT`)
    /// turns export on too; `OTEL_SDK_DISABLED=true` turns it off.
    #[arg(long, env = "BOOKS_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// A browser origin (`https://app.example`) whose scripts may call the API (CORS);
    /// `*` for any origin, without credentials. Repeatable; the variable takes a
    /// comma-separated list. Other origins get no CORS fields.
    #[arg(
        long = "cors-origin",
        env = "BOOKS_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,

    /// Requests per second each client may send to the API (429 with Retry-After past
    /// it; the operator endpoints are never limited). Per process. Off by default.
    #[arg(long, env = "BOOKS_RATE_LIMIT")]
    pub rate_limit: Option<NonZeroU32>,

    /// Requests a client may send at once after a pause [default: the rate limit].
    #[arg(long, env = "BOOKS_RATE_LIMIT_BURST", requires = "rate_limit")]
    pub rate_limit_burst: Option<NonZeroU32>,

    /// Proxies (CIDR ranges or addresses, comma-separated) whose `X-Forwarded-For` names
    /// the client for rate limits: the right-most address in it that is not one of them.
    #[arg(
        long,
        env = "BOOKS_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_network
    )]
    pub trusted_proxies: Vec<IpNet>,

    /// Whether answers of 1 KiB or more go compressed (gzip, br or zstd, as
    /// Accept-Encoding prefers), each encoding with its own ETag.
    #[arg(long, env = "BOOKS_COMPRESSION", default_value_t = true, action = clap::ArgAction::Set)]
    pub compression: bool,
}

/// How long browsers may keep a preflight's answer.
const CORS_MAX_AGE: Duration = Duration::from_secs(600);

/// A CIDR range, or one address as a range of one.
fn parse_network(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is no CIDR range or IP address"))
}

fn default_listen() -> SocketAddr {
    match std::env::var("PORT")
        .ok()
        .and_then(|port| port.parse::<u16>().ok())
    {
        Some(port) => SocketAddr::from(([0, 0, 0, 0], port)),
        None => SocketAddr::from(([127, 0, 0, 1], 8080)),
    }
}

fn default_database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "sqlite://books.db".to_owned())
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
            .with_docs(self.docs)
            .with_cache((self.cache_entries > 0).then_some(CacheLimits {
                entries: self.cache_entries,
                bytes: self.cache_bytes,
            }))
            .with_cache_control(self.cache_control)
            .with_require_if_match(self.require_if_match)
            .with_compression(self.compression)
            .with_idempotency_ttl(Duration::from_secs(self.idempotency_ttl))
    }

    /// The database settings beside its URL.
    pub fn store_settings(&self) -> books_sqlx::StoreSettings {
        let mut store = books_sqlx::StoreSettings::default();
        store.push = self.push;
        store.transaction_pooler = self.transaction_pooler;
        store.notify_url.clone_from(&self.notify_url);
        store.replica_urls.clone_from(&self.replica_urls);
        store.replica_wait = Duration::from_millis(self.replica_wait_ms);
        store.primary_wait = Duration::from_secs(self.primary_wait);
        store
    }

    /// CORS and rate limits (trace context off: the server turns it on with export).
    pub fn client_policy(&self) -> Result<crate::ClientPolicy, crate::InvalidOrigin> {
        let cors = (!self.cors_origins.is_empty())
            .then(|| crate::Cors::new(&self.cors_origins, CORS_MAX_AGE))
            .transpose()?;
        let rate_limit = self.rate_limit.map(|per_second| crate::RateLimit {
            per_second,
            burst: self.rate_limit_burst.unwrap_or(per_second),
            trusted_proxies: self.trusted_proxies.clone(),
        });
        Ok(crate::ClientPolicy {
            cors,
            rate_limit,
            trace_context: false,
        })
    }

    /// The server's timeouts.
    pub fn limits(&self) -> crate::Limits {
        crate::Limits {
            header_timeout: Duration::from_secs(self.header_timeout),
            request_timeout: Duration::from_secs(self.request_timeout),
            shutdown_grace: Duration::from_secs(self.shutdown_grace),
            max_in_flight: self.max_in_flight.get(),
        }
    }
}
