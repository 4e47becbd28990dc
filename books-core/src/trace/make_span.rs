//! A host's own server span for each request, as tower-http's `MakeSpan`: at a level of
//! the host's choosing, with fields of its own.

use std::fmt;
use std::sync::Arc;

use tracing::Span;

use super::{Name, Template, UNMATCHED, request_span};
use crate::request_id::RequestId;

/// Makes each request's server span in place of the core's own `request` span
/// ([`Config::with_request_span`](crate::Config::with_request_span)). Once the answer is
/// known the core records, on the span, each of these fields it declares (as
/// `tracing::field::Empty`): `http.response.status_code` (an int), `error.type` and
/// `otel.status_code` (on a 5xx), `books.cache.hit`. The request's store, `idempotency`
/// and `if_match` spans are its children.
///
/// ```
/// use books_core::trace::SpanRequest;
/// use tracing::field::Empty;
///
/// let config = books_core::Config::default().with_request_span(|request: &SpanRequest<'_>| {
///     let tenant = request.parts().headers.get("x-tenant").and_then(|v| v.to_str().ok());
///     tracing::info_span!(
///         "request",
///         otel.name = %request.name(),
///         otel.kind = "server",
///         http.route = request.route().map(tracing::field::display),
///         tenant,
///         http.response.status_code = Empty,
///     )
/// });
/// ```
///
/// A closure `Fn(&SpanRequest<'_>) -> Span` is one; [`SpanRequest::default_span`] is the
/// core's own span, for a host that picks per request.
pub trait MakeRequestSpan: Send + Sync + 'static {
    /// The server span of `request`.
    fn make_span(&self, request: &SpanRequest<'_>) -> Span;
}

impl<F: Fn(&SpanRequest<'_>) -> Span + Send + Sync + 'static> MakeRequestSpan for F {
    fn make_span(&self, request: &SpanRequest<'_>) -> Span {
        self(request)
    }
}

/// A request as its span is made: its parts, its id and its route.
#[derive(Debug)]
pub struct SpanRequest<'a> {
    parts: &'a http::request::Parts,
    id: &'a RequestId,
    prefix: &'a str,
    base_url: &'a str,
    route: &'static str,
}

impl<'a> SpanRequest<'a> {
    /// `parts`, with `id`, routed to `route` (relative to `prefix`), served under
    /// `base_url`.
    pub(crate) fn new(
        parts: &'a http::request::Parts,
        id: &'a RequestId,
        prefix: &'a str,
        base_url: &'a str,
        route: &'static str,
    ) -> Self {
        Self {
            parts,
            id,
            prefix,
            base_url,
            route,
        }
    }

    /// The request's method, URI, version and headers.
    pub fn parts(&self) -> &'a http::request::Parts {
        self.parts
    }

    /// The request's id (`X-Request-Id`, the client's or a new one).
    pub fn id(&self) -> &'a RequestId {
        self.id
    }

    /// The route template, prefix included (`/api/books/{id}`); `None` for a path no route
    /// matches.
    pub fn route(&self) -> Option<impl fmt::Display + use<'a>> {
        (self.route != UNMATCHED).then_some(Template {
            prefix: self.prefix,
            route: self.route,
        })
    }

    /// The span's name by the conventions: `GET /api/books/{id}`, the method alone without
    /// a route, `HTTP` for a method they do not name.
    pub fn name(&self) -> impl fmt::Display + use<'a> {
        Name {
            method: &self.parts.method,
            route: (self.route != UNMATCHED).then_some(Template {
                prefix: self.prefix,
                route: self.route,
            }),
        }
    }

    /// The core's own `request` span (at `DEBUG`, the fields in [the module's
    /// table](super)).
    pub fn default_span(&self) -> Span {
        request_span(self.parts, self.id, self.prefix, self.base_url, self.route)
    }
}

/// A [`MakeRequestSpan`], as the configuration keeps it.
#[derive(Clone)]
pub(crate) struct SpanMaker(pub(crate) Arc<dyn MakeRequestSpan>);

impl fmt::Debug for SpanMaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MakeRequestSpan")
    }
}
