//! The request's spans: plain `tracing` spans whose fields carry OpenTelemetry's
//! semantic-convention names, so a host's `tracing-opentelemetry` layer exports them as
//! they are, with no configuration and no OpenTelemetry dependency here.
//!
//! Every span is at `DEBUG` (as tower-http's `TraceLayer` does), so a subscriber that
//! keeps `INFO` pays one level comparison per span and records nothing.
//!
//! | span | `otel.kind` | fields |
//! |---|---|---|
//! | `request` (`otel.name` `GET /api/books/{id}`, `HTTP …` for a method the conventions do not name) | `server` | `id` (the request id), `http.request.method` (`_OTHER` for such a method, and `http.request.method_original`), `http.route` (the template, prefix included; none for a path no route matches), `url.scheme` (the request's, else the base URL's), `url.path`, `url.query` (when present), `server.address`, `server.port` (an int), `user_agent.original`, `http.response.status_code` (an int), `error.type` and `otel.status_code` `ERROR` on a 5xx, `books.cache.hit` (`true` when a cached answer was served) |
//! | `version_check` | internal | `books.version_check.shared`: `true` when the request joined a check another request sent (its store call is under the sender's span) |
//! | `store` (`otel.name` `store get`) | `client` | `db.operation.name` (`list`, `get`, `create`, `version` …), `db.system.name`, `books.db.pool` (`primary`, `replica`) and `server.address` and `server.port` when the store records them ([`store_answered_by`]), `error.type` on a failure |
//! | `idempotency` | internal | a create with `Idempotency-Key`: `books.idempotency.outcome` (`stored`, `replayed`, `conflict`, `mismatch`) |
//! | `if_match` | internal | a conditional update or delete: `books.if_match.outcome` (`done`, `refused`) |
//!
//! A host makes the server span itself, at its own level and with fields of its own, with
//! a [`MakeRequestSpan`].
//!
//! The request's parent is whatever span or OpenTelemetry context is current where the
//! binding polls [`BooksApi::handle`](crate::BooksApi::handle): a host that extracts a
//! `traceparent` (books-hyper does, when asked) makes it current around the call.

mod make_span;

use std::fmt;

use http::header::{HOST, USER_AGENT};
use http::{Method, StatusCode};
use tracing::field::Empty;
use tracing::{Instrument as _, Span};

use crate::request_id::RequestId;
use crate::store::Conditional;

pub(crate) use make_span::SpanMaker;
pub use make_span::{MakeRequestSpan, SpanRequest};

/// The label of requests no route matched (their span's route, their metrics' `route`).
pub(crate) const UNMATCHED: &str = "unmatched";

/// Whether a subscriber keeps this crate's `DEBUG` spans at all: the callsite's cached
/// interest (a load and a comparison when none does), before anything looks up the
/// current span.
fn wanted() -> bool {
    tracing::span_enabled!(tracing::Level::DEBUG)
}

/// The server span of one request routed to `route` (relative to `prefix`), served
/// under `base_url` (whose scheme stands for the request's when it names none).
fn request_span(
    parts: &http::request::Parts,
    id: &RequestId,
    prefix: &str,
    base_url: &str,
    route: &'static str,
) -> Span {
    // Every field is computed inside the macro, only when the span is kept: the `Host`
    // look-up alone was a twentieth of a ping's instructions with tracing off
    // (`scripts/load.py --instructions --workloads ping`).
    let route = (route != UNMATCHED).then_some(Template { prefix, route });
    tracing::debug_span!(
        "request",
        id = %id,
        otel.name = %Name { method: &parts.method, route },
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method_name(&parts.method),
        http.request.method_original = (method_name(&parts.method) == OTHER)
            .then(|| parts.method.as_str()),
        http.route = route.map(display),
        url.scheme = %parts.uri.scheme_str().unwrap_or(
            if base_url.starts_with("https:") { "https" } else { "http" }
        ),
        url.path = parts.uri.path(),
        url.query = parts.uri.query(),
        server.address = authority(parts).0,
        server.port = authority(parts).1.map(i64::from),
        user_agent.original = parts.headers.get(USER_AGENT).and_then(|v| v.to_str().ok()),
        http.response.status_code = Empty,
        "error.type" = Empty,
        books.cache.hit = Empty,
    )
}

/// Records the answer's status on the request's span (a 5xx as an error).
pub(crate) fn answered(span: &Span, status: StatusCode) {
    if span.is_disabled() {
        return;
    }
    // An int, as the conventions type it (an unsigned value would go out as text).
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("error.type", status.as_str());
        span.record("otel.status_code", "ERROR");
    }
}

/// Marks the current request's span as answered from the cache.
pub(crate) fn cache_hit() {
    if wanted() {
        Span::current().record("books.cache.hit", true);
    }
}

/// A span around one store call.
pub(crate) fn store_span(operation: &'static str) -> Span {
    tracing::debug_span!(
        "store",
        otel.name = %StoreName(operation),
        otel.kind = "client",
        otel.status_code = Empty,
        db.operation.name = operation,
        db.system.name = Empty,
        books.db.pool = Empty,
        server.address = Empty,
        server.port = Empty,
        "error.type" = Empty,
    )
}

/// Runs `work` in `span`, entered around each poll only when a subscriber keeps it.
pub(crate) async fn within<F: Future>(span: &Span, work: F) -> F::Output {
    if span.is_disabled() {
        work.await
    } else {
        work.instrument(span.clone()).await
    }
}

/// The span of a create with `Idempotency-Key`.
pub(crate) fn idempotency_span() -> Span {
    tracing::debug_span!("idempotency", books.idempotency.outcome = Empty)
}

/// Records what became of an idempotency key on the current span.
pub(crate) fn idempotency(outcome: &'static str) {
    if wanted() {
        Span::current().record("books.idempotency.outcome", outcome);
    }
}

/// A conditional write (`If-Match`) around its store call; its outcome is recorded.
pub(crate) async fn if_match<T, E>(
    write: impl Future<Output = Result<Conditional<T>, E>>,
) -> Result<Conditional<T>, E> {
    let span = tracing::debug_span!("if_match", books.if_match.outcome = Empty);
    let result = within(&span, write).await;
    if !span.is_disabled() {
        let outcome = match &result {
            Ok(Conditional::Done(_)) => "done",
            Ok(Conditional::Refused(_)) => "refused",
            Err(_) => "failed",
        };
        span.record("books.if_match.outcome", outcome);
    }
    result
}

/// Records a failed store call on its span (`outcome` as the metrics name it).
pub(crate) fn store_failed(span: &Span, outcome: &'static str) {
    if !span.is_disabled() {
        span.record("error.type", outcome);
        span.record("otel.status_code", "ERROR");
    }
}

/// For a store: records on the current store call's span which database system
/// answered (`db.system.name`: `postgresql`, `mariadb`, `sqlite` …), from which pool
/// (`primary` or `replica`) and, when known, which server (`server.address` and
/// `server.port`). Costs a load and a comparison when no subscriber keeps the spans.
pub fn store_answered_by(system: &'static str, pool: &'static str, server: Option<(&str, u16)>) {
    if wanted() {
        let span = Span::current();
        span.record("db.system.name", system);
        span.record("books.db.pool", pool);
        if let Some((address, port)) = server {
            span.record("server.address", address);
            span.record("server.port", i64::from(port));
        }
    }
}

/// What the conventions call a method: itself when they name it, `_OTHER` otherwise (a
/// client does not choose the spans' names).
fn method_name(method: &Method) -> &str {
    match *method {
        Method::GET
        | Method::HEAD
        | Method::POST
        | Method::PUT
        | Method::DELETE
        | Method::CONNECT
        | Method::OPTIONS
        | Method::TRACE
        | Method::PATCH => method.as_str(),
        _ => OTHER,
    }
}

/// The conventions' name for a method they do not name.
const OTHER: &str = "_OTHER";

/// The host and port the request was sent to: `Host` (HTTP/1.1), else the URI's
/// authority (HTTP/2's `:authority`).
fn authority(parts: &http::request::Parts) -> (Option<&str>, Option<u16>) {
    let value = match parts.headers.get(HOST).and_then(|v| v.to_str().ok()) {
        Some(host) => host,
        None => match parts.uri.authority() {
            Some(authority) => authority.as_str(),
            None => return (None, None),
        },
    };
    // `[::1]:8080`, `example.com:8080`, `example.com`.
    match value.rfind(':') {
        Some(colon) if !value[colon..].contains(']') => {
            let port = value[colon + 1..].parse().ok();
            (Some(value[..colon].trim_matches(['[', ']'])), port)
        }
        _ => (Some(value.trim_matches(['[', ']'])), None),
    }
}

/// A route template with the mount prefix: `/api/books/{id}`.
#[derive(Clone, Copy)]
struct Template<'a> {
    prefix: &'a str,
    route: &'static str,
}

impl fmt::Display for Template<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.prefix, self.route)
    }
}

/// The server span's name: the method and the route template, or the method alone.
struct Name<'a> {
    method: &'a Method,
    route: Option<Template<'a>>,
}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let method = match method_name(self.method) {
            OTHER => "HTTP",
            known => known,
        };
        match self.route {
            Some(route) => write!(f, "{method} {route}"),
            None => write!(f, "{method}"),
        }
    }
}

/// A store span's name: `store get`.
struct StoreName(&'static str);

impl fmt::Display for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store {}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(host: &str) -> http::request::Parts {
        http::Request::get("/api/books/1")
            .header(HOST, host)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    #[test]
    fn the_authority_splits_into_host_and_port() {
        assert_eq!(
            authority(&parts("example.com:8080")),
            (Some("example.com"), Some(8080))
        );
        assert_eq!(
            authority(&parts("example.com")),
            (Some("example.com"), None)
        );
        assert_eq!(authority(&parts("[::1]:80")), (Some("::1"), Some(80)));
        assert_eq!(authority(&parts("[::1]")), (Some("::1"), None));
    }

    #[test]
    fn names_carry_the_method_and_the_template() {
        let route = Some(Template {
            prefix: "/api",
            route: "/books/{id}",
        });
        let name = Name {
            method: &Method::GET,
            route,
        };
        assert_eq!(name.to_string(), "GET /api/books/{id}");
        let name = Name {
            method: &Method::POST,
            route: None,
        };
        assert_eq!(name.to_string(), "POST");
        let odd = Method::from_bytes(b"BREW").unwrap();
        let name = Name {
            method: &odd,
            route,
        };
        assert_eq!(
            name.to_string(),
            "HTTP /api/books/{id}",
            "no client-chosen names"
        );
        assert_eq!(method_name(&odd), "_OTHER");
    }
}
