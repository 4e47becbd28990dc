//! A host's own server span (`Config::with_request_span`): made at the host's level with
//! the host's fields, the core's fields recorded on it, the store's spans under it.

use std::io::Write;
use std::sync::{Arc, Mutex};

use books_core::Config;
use books_core::testing::{Harness, InProcess};
use books_core::trace::SpanRequest;
use books_memstore::MemStore;
use bytes::Bytes;
use tracing::field::Empty;
use tracing_subscriber::fmt::format::FmtSpan;

/// Everything the subscriber writes.
#[derive(Clone, Default)]
struct Written(Arc<Mutex<Vec<u8>>>);

impl Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_hosts_span_carries_its_fields_and_the_cores() {
    let written = Written::default();
    let sink = written.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let config = Config::default().with_request_span(|request: &SpanRequest<'_>| {
        let tenant = request.parts().headers.get("x-tenant");
        tracing::info_span!(
            "served",
            otel.name = %request.name(),
            http.route = request.route().map(tracing::field::display),
            tenant = tenant.and_then(|v| v.to_str().ok()),
            http.response.status_code = Empty,
            books.cache.hit = Empty,
        )
    });
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let harness = InProcess::new(MemStore::new(), config);
            for _ in 0..2 {
                let request = http::Request::get("/api/books/7")
                    .header("x-tenant", "acme")
                    .body(Bytes::new())
                    .unwrap();
                assert_eq!(harness.send(request).await.status(), 404);
            }
        });
    });
    let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
    let closed: Vec<&str> = text.lines().filter(|l| l.contains("close")).collect();
    let served: Vec<&&str> = closed
        .iter()
        .filter(|l| l.contains("served{") && !l.contains("store{"))
        .collect();
    assert_eq!(served.len(), 2, "{text}");
    for line in &served {
        assert!(
            line.contains(" INFO served{"),
            "at the host's level: {line}"
        );
        for field in [
            "otel.name=GET /api/books/{id}",
            "http.route=/api/books/{id}",
            "tenant=\"acme\"",
            "http.response.status_code=404",
        ] {
            assert!(line.contains(field), "{field} in {line}");
        }
    }
    assert!(
        !text.contains("request{"),
        "the core's own span is not made: {text}"
    );
    assert!(
        closed
            .iter()
            .any(|l| l.contains("served{") && l.contains("store{")),
        "the store's span is under the host's: {text}"
    );
}
