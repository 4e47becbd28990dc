//! Traces against a real OTLP/HTTP receiver: the server binary exports to a hyper server
//! in the test, which decodes each `ExportTraceServiceRequest` with the protocol's own
//! types. A caller's `traceparent` is continued (trace id, parent span), the server span
//! carries the route template and status, a store span sits under it; a malformed
//! `traceparent` starts a new trace; a collector that stalls or refuses costs no answer
//! anything, and the spans it could not take are counted in `/metrics`. Every wait is
//! bounded.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A caller's trace: its trace id and the span the request is sent from.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// What the receiver does with an export.
#[derive(Clone, Copy, PartialEq)]
enum Collector {
    /// Decodes it, hands its spans to the test and answers 200.
    Answers,
    /// Reads it and never answers.
    Stalls,
}

/// An OTLP/HTTP receiver on an ephemeral port: its address, and the spans that arrive.
async fn receiver(mode: Collector) -> (SocketAddr, mpsc::UnboundedReceiver<Span>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (spans, arrived) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let spans = spans.clone();
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let spans = spans.clone();
                async move {
                    assert_eq!(request.uri().path(), "/v1/traces");
                    assert_eq!(request.headers()["content-type"], "application/x-protobuf");
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    if mode == Collector::Stalls {
                        std::future::pending::<()>().await;
                    }
                    let export = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    for resource in export.resource_spans {
                        for scope in resource.scope_spans {
                            for span in scope.spans {
                                let _ = spans.send(span);
                            }
                        }
                    }
                    let answer = ExportTraceServiceResponse::default().encode_to_vec();
                    let mut response = hyper::Response::new(Full::new(Bytes::from(answer)));
                    response.headers_mut().insert(
                        "content-type",
                        http::HeaderValue::from_static("application/x-protobuf"),
                    );
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, arrived)
}

/// The server binary exporting to `collector` (a base URL), in-memory SQLite, batches
/// sent every 50 ms; `env` adds or overrides variables.
async fn server(collector: &str, env: &[(&str, &str)]) -> (Child, SocketAddr) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_books-api"));
    command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ])
        .env("RUST_LOG", "error")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_TRACES_SAMPLER")
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("start the server");
    let addr = common::listening(&mut child).await;
    (child, addr)
}

/// Spans as they arrive until `wanted` holds for the ones seen, within 10 s.
async fn spans_until(
    arrived: &mut mpsc::UnboundedReceiver<Span>,
    wanted: impl Fn(&[Span]) -> bool,
) -> Vec<Span> {
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while !wanted(&seen) {
            seen.push(arrived.recv().await.expect("the receiver runs"));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("spans did not arrive in time; got {seen:#?}"));
    seen
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A span's attribute, as text (strings) or a number's text.
fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|kv| kv.key == key)?;
    match value.value.as_ref()?.value.as_ref()? {
        Value::StringValue(text) => Some(text.clone()),
        Value::IntValue(n) => Some(n.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// Whether a span's attribute is an int (as the conventions type status codes and
/// ports), not the same digits as text.
fn is_int(span: &Span, key: &str) -> bool {
    let value = span.attributes.iter().find(|kv| kv.key == key);
    let value = value.and_then(|kv| kv.value.as_ref()?.value.as_ref());
    matches!(value, Some(Value::IntValue(_)))
}

fn server_span<'a>(spans: &'a [Span], request_id: &str) -> Option<&'a Span> {
    spans.iter().find(|span| {
        span.kind == SpanKind::Server as i32 && attribute(span, "id").as_deref() == Some(request_id)
    })
}

#[tokio::test]
async fn a_callers_trace_continues_through_the_server_span_to_the_store() {
    let (collector, mut arrived) = receiver(Collector::Answers).await;
    let (_server, addr) = server(&format!("http://{collector}"), &[]).await;
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let answer = common::call(
        addr,
        "GET",
        "/api/books/1?include=author",
        &[
            ("traceparent", &traceparent),
            ("tracestate", "vendor=value"),
            ("x-request-id", "traced-1"),
            ("user-agent", "traces-test/1"),
        ],
        "",
    )
    .await;
    assert_eq!(answer.status, 200);

    let spans = spans_until(&mut arrived, |spans| {
        server_span(spans, "traced-1").is_some_and(|server| {
            spans
                .iter()
                .any(|span| span.parent_span_id == server.span_id && span.name == "store get")
        })
    })
    .await;
    let server = server_span(&spans, "traced-1").unwrap();
    assert_eq!(server.name, "GET /api/books/{id}");
    assert_eq!(hex(&server.trace_id), TRACE_ID, "the caller's trace");
    assert_eq!(
        hex(&server.parent_span_id),
        CALLER_SPAN,
        "under the caller's span"
    );
    assert_eq!(server.trace_state, "vendor=value");
    for (key, value) in [
        ("http.request.method", "GET"),
        ("http.route", "/api/books/{id}"),
        ("http.response.status_code", "200"),
        ("url.path", "/api/books/1"),
        ("url.query", "include=author"),
        ("url.scheme", "http"),
        ("server.address", "127.0.0.1"),
        ("server.port", &addr.port().to_string()),
        ("user_agent.original", "traces-test/1"),
    ] {
        assert_eq!(attribute(server, key).as_deref(), Some(value), "{key}");
    }
    for key in ["http.response.status_code", "server.port"] {
        assert!(is_int(server, key), "{key} is an int");
    }
    assert_eq!(attribute(server, "error.type"), None);

    let store = spans
        .iter()
        .find(|span| span.parent_span_id == server.span_id && span.name == "store get")
        .unwrap();
    assert_eq!(store.trace_id, server.trace_id);
    assert_eq!(store.kind, SpanKind::Client as i32);
    assert_eq!(
        attribute(store, "db.operation.name").as_deref(),
        Some("get")
    );
    assert_eq!(
        attribute(store, "db.system.name").as_deref(),
        Some("sqlite")
    );

    // The same book again: answered from the cache, which the server span says.
    let answer = common::call(
        addr,
        "GET",
        "/api/books/1?include=author",
        &[("x-request-id", "traced-2")],
        "",
    )
    .await;
    assert_eq!(answer.status, 200);
    let spans = spans_until(&mut arrived, |spans| {
        server_span(spans, "traced-2").is_some()
    })
    .await;
    let server = server_span(&spans, "traced-2").unwrap();
    assert_eq!(
        attribute(server, "books.cache.hit").as_deref(),
        Some("true")
    );
    assert!(
        server.parent_span_id.is_empty(),
        "a new trace without traceparent"
    );
    // Exact mode asked the store's version first: this request sent the check, whose
    // query is under it.
    let check = spans
        .iter()
        .find(|span| span.parent_span_id == server.span_id && span.name == "version_check")
        .expect("a version check under the server span");
    assert_eq!(
        attribute(check, "books.version_check.shared").as_deref(),
        Some("false")
    );
    let query = spans
        .iter()
        .find(|span| span.parent_span_id == check.span_id)
        .unwrap_or_else(|| panic!("the version query under the check: {spans:#?}"));
    assert_eq!(query.name, "store version");
}

#[tokio::test]
async fn writes_show_their_idempotency_and_if_match_work() {
    let (collector, mut arrived) = receiver(Collector::Answers).await;
    let (_server, addr) = server(&format!("http://{collector}"), &[]).await;
    let body = r#"{"title":"Traced","author_id":1,"year":2020}"#;
    let json = ("content-type", "application/json");
    let created = common::call(
        addr,
        "POST",
        "/api/books",
        &[
            json,
            ("idempotency-key", "key-1"),
            ("x-request-id", "create-1"),
        ],
        body,
    )
    .await;
    assert_eq!(created.status, 201);
    let location = created.header("location").unwrap();
    let path = &location[location.find("/api/").unwrap()..];
    let etag = created.header("etag").unwrap().to_owned();
    let updated = common::call(
        addr,
        "PUT",
        path,
        &[json, ("if-match", &etag), ("x-request-id", "update-1")],
        r#"{"title":"Traced again","author_id":1,"year":2021}"#,
    )
    .await;
    assert_eq!(updated.status, 200);

    let child = |spans: &[Span], id: &str, name: &str| -> Option<Span> {
        let server = server_span(spans, id)?;
        spans
            .iter()
            .find(|span| span.parent_span_id == server.span_id && span.name == name)
            .cloned()
    };
    let spans = spans_until(&mut arrived, |spans| {
        child(spans, "create-1", "idempotency").is_some()
            && child(spans, "update-1", "if_match").is_some()
    })
    .await;
    let create = server_span(&spans, "create-1").unwrap();
    assert_eq!(create.name, "POST /api/books");
    assert_eq!(
        attribute(create, "http.response.status_code").as_deref(),
        Some("201")
    );
    let keyed = child(&spans, "create-1", "idempotency").unwrap();
    assert_eq!(
        attribute(&keyed, "books.idempotency.outcome").as_deref(),
        Some("stored")
    );
    assert!(
        spans
            .iter()
            .any(|span| span.parent_span_id == keyed.span_id && span.name == "store create"),
        "the keyed create's store call under the idempotency span"
    );
    let update = server_span(&spans, "update-1").unwrap();
    assert_eq!(update.name, "PUT /api/books/{id}");
    let conditional = child(&spans, "update-1", "if_match").unwrap();
    assert_eq!(
        attribute(&conditional, "books.if_match.outcome").as_deref(),
        Some("done")
    );
    // A method the conventions do not name: `_OTHER`, and a name no client chooses.
    let brewed = common::call(
        addr,
        "BREW",
        "/api/books",
        &[("x-request-id", "brew-1")],
        "",
    )
    .await;
    assert_eq!(brewed.status, 405);
    let spans = spans_until(&mut arrived, |spans| server_span(spans, "brew-1").is_some()).await;
    let brew = server_span(&spans, "brew-1").unwrap();
    assert_eq!(brew.name, "HTTP /api/books");
    assert_eq!(
        attribute(brew, "http.request.method").as_deref(),
        Some("_OTHER")
    );
    assert_eq!(
        attribute(brew, "http.request.method_original").as_deref(),
        Some("BREW")
    );
}

#[tokio::test]
async fn a_malformed_traceparent_starts_a_new_trace() {
    let (collector, mut arrived) = receiver(Collector::Answers).await;
    let (_server, addr) = server(&format!("http://{collector}"), &[]).await;
    for (id, traceparent) in [
        ("bad-1", "00-zz-not-a-trace-01"),
        (
            "bad-2",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ),
        (
            "bad-3",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
    ] {
        let answer = common::call(
            addr,
            "GET",
            "/api/ping",
            &[("traceparent", traceparent), ("x-request-id", id)],
            "",
        )
        .await;
        assert_eq!(answer.status, 200, "{traceparent}");
        let spans = spans_until(&mut arrived, |spans| server_span(spans, id).is_some()).await;
        let server = server_span(&spans, id).unwrap();
        assert_eq!(server.name, "GET /api/ping");
        assert!(
            server.parent_span_id.is_empty(),
            "{traceparent}: a root span"
        );
        assert_ne!(hex(&server.trace_id), TRACE_ID);
        assert_ne!(hex(&server.trace_id), "0".repeat(32));
    }
}

/// Requests answered one after another while the collector misbehaves: each within a
/// second. Then `/metrics` counts the spans it did not take, and SIGTERM ends the server
/// within its flush bound.
async fn answers_stay_prompt(collector: &str) {
    let (mut server, addr) = server(
        collector,
        &[
            ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
        ],
    )
    .await;
    let started = Instant::now();
    for n in 0..150 {
        let path = if n % 2 == 0 {
            "/api/books?page=1"
        } else {
            "/api/ping"
        };
        let sent = Instant::now();
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            common::call(addr, "GET", path, &[], ""),
        )
        .await
        .expect("an answer within 5 s");
        assert_eq!(answer.status, 200);
        assert!(
            sent.elapsed() < Duration::from_secs(1),
            "answer {n} took {:?}",
            sent.elapsed()
        );
    }
    assert!(started.elapsed() < Duration::from_secs(30));

    let dropped = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let metrics = common::call(addr, "GET", "/metrics", &[], "").await;
            let text = String::from_utf8_lossy(&metrics.body).into_owned();
            let dropped: f64 = text
                .lines()
                .filter(|line| line.starts_with("books_trace_spans_dropped_total{"))
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            if dropped > 0.0 {
                return dropped;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("dropped spans counted in /metrics");
    assert!(dropped > 0.0);

    let pid = server.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(15), server.wait())
        .await
        .expect("the server exits within its flush bound")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn a_stalled_collector_costs_no_answer_anything() {
    let (collector, _arrived) = receiver(Collector::Stalls).await;
    answers_stay_prompt(&format!("http://{collector}")).await;
}

#[tokio::test]
async fn a_refusing_collector_costs_no_answer_anything() {
    // A port nothing listens on: bound, then closed.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    answers_stay_prompt(&format!("http://{closed}")).await;
}

#[tokio::test]
async fn an_unsupported_protocol_is_refused_at_start() {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(env!("CARGO_BIN_EXE_books-api"))
            .args(["--listen", "127.0.0.1:0", "--database-url", "memory"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .env_remove("OTEL_SDK_DISABLED")
            .output(),
    )
    .await
    .expect("the server exits at once")
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("http/protobuf"), "{stderr}");
}
