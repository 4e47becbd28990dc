//! Traces over OTLP/HTTP (protobuf): the OpenTelemetry SDK behind the core's `tracing`
//! spans, on when `--otlp-endpoint` or the standard `OTEL_*` variables say so.
//!
//! A collector that is down or slow costs no request anything: ended spans go into a
//! bounded queue that one background thread exports in batches; past the bound they are
//! dropped and counted (`books_trace_spans_dropped_total{reason="queue_full"}`), and so
//! are the spans of a batch the collector did not take (`reason="export_failed"`, after
//! the exporter's timeout, `OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default).

use std::env;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, Span, SpanData,
    SpanExporter, SpanProcessor,
};

/// Spans dropped instead of exported, by `reason` (`queue_full`, `export_failed`).
pub const SPANS_DROPPED: &str = "books_trace_spans_dropped_total";

/// The default bound on spans waiting for export (`OTEL_BSP_MAX_QUEUE_SIZE`).
const QUEUE_DEFAULT: usize = 2048;

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("setting up trace export failed: {0}")]
pub struct TraceError(String);

/// The process's trace export while it runs: its tracer for the `tracing` layer, and its
/// provider to flush at shutdown.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Sets up export if `endpoint` (the `--otlp-endpoint` flag, a base URL as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`) or the `OTEL_*` variables ask for it: `None` when
    /// they do not, or when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
    /// Also makes W3C Trace Context the process's propagator. Call it inside the tokio
    /// runtime: the exporter's HTTP client runs on it.
    pub fn from_env(endpoint: Option<&str>) -> Result<Option<Self>, TraceError> {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        let configured = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        if endpoint.is_none() && !configured {
            return Ok(None);
        }
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = var(name)
                && protocol != "http/protobuf"
            {
                return Err(TraceError(format!(
                    "{name}={protocol}: this server exports over http/protobuf only"
                )));
            }
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| TraceError("no tokio runtime for the exporter".into()))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(OnRuntime {
                // The timeout the exporter resolves from `OTEL_EXPORTER_OTLP_TIMEOUT`
                // bounds the request only with a client it builds itself; ours reads
                // the same variables.
                client: HyperClient::with_default_connector(export_timeout(), None),
                runtime,
            });
        if let Some(endpoint) = endpoint {
            exporter =
                exporter.with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
        }
        let exporter = exporter
            .build()
            .map_err(|error| TraceError(error.to_string()))?;
        let max_queue = var("OTEL_BSP_MAX_QUEUE_SIZE")
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(QUEUE_DEFAULT);
        let queued = Arc::new(AtomicUsize::new(0));
        let batches = BatchSpanProcessor::builder(Counted {
            inner: exporter,
            queued: queued.clone(),
        })
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(max_queue)
                .build(),
        )
        .build();
        let mut resource = Resource::builder();
        if var("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("books-api");
        }
        // The sampler comes from `OTEL_TRACES_SAMPLER` and `_ARG` (the SDK's default
        // configuration reads them; parent-based always-on without them).
        let provider = SdkTracerProvider::builder()
            .with_span_processor(Bounded {
                inner: batches,
                queued,
                max: max_queue,
            })
            .with_resource(resource.build())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        for reason in ["queue_full", "export_failed"] {
            metrics::counter!(SPANS_DROPPED, "reason" => reason).absolute(0);
        }
        Ok(Some(Self { provider }))
    }

    /// The tracer the `tracing-opentelemetry` layer records with.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("books-api")
    }

    /// Exports what is queued and stops, waiting at most `bound` (the collector may be
    /// gone). Blocks: call it outside the runtime's worker threads (`spawn_blocking`).
    pub fn shutdown(&self, bound: Duration) {
        if let Err(error) = self.provider.shutdown_with_timeout(bound) {
            tracing::warn!(%error, "flushing traces at shutdown failed");
        }
    }
}

/// A variable that is set and not empty.
fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The export request's bound: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, then
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), 10 s by default.
fn export_timeout() -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|name| var(name)?.parse().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// Counts spans dropped for `reason`.
fn dropped(reason: &'static str, spans: usize) {
    metrics::counter!(SPANS_DROPPED, "reason" => reason).increment(spans as u64);
}

/// Hyper's client, run on the server's runtime: the batch processor exports from a
/// thread of its own, where no runtime is current, and only waits here.
#[derive(Debug, Clone)]
struct OnRuntime {
    client: HyperClient,
    runtime: tokio::runtime::Handle,
}

#[async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await?
    }
}

/// The batch processor behind a bound of its own on spans ended but not yet exported,
/// so that a span past it is counted as it is dropped (the SDK's own count is private).
/// The bound is the SDK queue's size, so the SDK never drops one itself.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    queued: Arc<AtomicUsize>,
    max: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let admitted = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok();
        if admitted {
            self.inner.on_end(span);
        } else {
            dropped("queue_full", 1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, giving the queue's places back as batches leave (and counting a
/// batch the collector did not take).
#[derive(Debug)]
struct Counted {
    inner: opentelemetry_otlp::SpanExporter,
    queued: Arc<AtomicUsize>,
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.queued.fetch_sub(spans, Ordering::AcqRel);
        if result.is_err() {
            dropped("export_failed", spans);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
