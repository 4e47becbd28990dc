//! W3C Trace Context from the caller (feature `opentelemetry`): the request's
//! `traceparent` and `tracestate`, read by the process's global OpenTelemetry
//! propagator, become the current OpenTelemetry context while the API answers, so the
//! core's `request` span continues the caller's trace in a `tracing-opentelemetry` layer
//! (with its default context activation). Without the headers, or with malformed ones
//! (which the W3C propagator ignores, as the specification says), the span starts a new
//! trace. Nothing here can fail a request.

use std::future::Future;

use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::Extractor;

/// The request's headers as the propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

/// The caller's context, as the global propagator reads `headers`.
pub(crate) fn extract(headers: &HeaderMap) -> Context {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&Headers(headers))
    })
}

/// `answer` with `parent` current around each poll.
pub(crate) fn within<F: Future>(parent: Context, answer: F) -> impl Future<Output = F::Output> {
    answer.with_context(parent)
}
