//! Metrics through the [`metrics`](https://docs.rs/metrics/0.24) facade. Nothing is recorded unless the host installs
//! a recorder (for Prometheus: `metrics-exporter-prometheus`, as the example server does).
//!
//! | name | kind | labels |
//! |---|---|---|
//! | [`REQUESTS`] | counter | `method`, `route`, `status` |
//! | [`REQUEST_DURATION`] | histogram (seconds) | `method`, `route`, `status` |
//! | [`IN_FLIGHT`] | gauge | — |
//! | [`STORE_DURATION`] | histogram (seconds) | `operation`, `outcome` |
//! | [`REJECTIONS`] | counter | `reason` |
//! | [`CACHE`] | counter | `outcome` (`hit`, `miss`) |
//! | [`IDEMPOTENCY`] | counter | `outcome` (`stored`, `replayed`, `conflict`, `mismatch`) |
//! | [`CACHE_REWRITES`] | counter | — |
//!
//! `route` is the route template relative to the prefix (`/books/{id}`, never the raw
//! path), or `unmatched`; `method` is one the API knows or `other`. Every label therefore
//! takes a handful of values whatever clients send.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use http::{Method, StatusCode};
use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, counter};

use tracing::Instrument as _;

use crate::store::StoreError;

/// Requests answered (counter).
pub const REQUESTS: &str = "books_http_requests_total";
/// Time from a request reaching the API to its answer (histogram, seconds).
pub const REQUEST_DURATION: &str = "books_http_request_duration_seconds";
/// Requests being answered right now (gauge).
pub const IN_FLIGHT: &str = "books_http_requests_in_flight";
/// Time of each store call (histogram, seconds); `outcome` is `ok`, `unavailable`,
/// `author_not_found` or `error`.
pub const STORE_DURATION: &str = "books_store_operation_duration_seconds";
/// Requests refused before they were handled (counter); `reason` is `body_limit` here,
/// and a host's refusals ([`refusal`](crate::refusal)) add theirs under the same name
/// (the books-hyper loop: `malformed`, `rate_limit`, `overload`, `timeout`).
pub const REJECTIONS: &str = "books_http_rejections_total";

/// Book and page reads answered from the cache of rendered answers, or not (counter).
pub const CACHE: &str = "books_cache_lookups_total";

/// Counts a request in flight until dropped, then records its answer.
pub(crate) struct RequestTimer {
    started: Instant,
}

impl RequestTimer {
    pub(crate) fn start() -> Self {
        in_flight(true);
        Self {
            started: Instant::now(),
        }
    }

    pub(crate) fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// Records the answer, and the in-flight count drops (here, in the same visit to the
    /// handles, rather than in `drop`).
    pub(crate) fn answered(self, method: &Method, route: &'static str, status: StatusCode) {
        let elapsed = std::mem::ManuallyDrop::new(self).started.elapsed();
        let (method, status) = (method_label(method), status_label(status));
        let address = (
            method.as_ptr(),
            route.as_ptr(),
            route.len(),
            status.as_ptr(),
        );
        with_handles(|handles, recorder| {
            in_flight_gauge(handles, recorder).decrement(1.0);
            let (requests, duration) = handles.answers.entry(address).or_insert_with(|| {
                let labels = [("method", method), ("route", route), ("status", status)];
                (
                    recorder.register_counter(&Key::from_parts(REQUESTS, &labels), &METADATA),
                    recorder
                        .register_histogram(&Key::from_parts(REQUEST_DURATION, &labels), &METADATA),
                )
            });
            requests.increment(1);
            duration.record(elapsed);
        });
    }
}

/// What `counter!` and `histogram!` would pass from this module.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The handles this thread records the per-request metrics through, for one recorder.
#[derive(Default)]
struct Handles {
    /// The recorder they belong to (its address): another recorder installed or set
    /// locally gets handles of its own.
    recorder: usize,
    /// [`REQUESTS`] and [`REQUEST_DURATION`] of each label set, keyed by where the
    /// labels' text lies: the labels are `'static` strings from a few places, so their
    /// addresses (and the lengths of those that share a first letter) tell them apart
    /// without reading them (the same text at two addresses would cost one more entry,
    /// never a wrong count).
    answers: HashMap<LabelsAt, (Counter, Histogram), foldhash::fast::RandomState>,
    in_flight: Option<Gauge>,
    /// [`STORE_DURATION`] of each operation and outcome, keyed as `answers` are.
    stores: HashMap<LabelsAt, Histogram, foldhash::fast::RandomState>,
    /// [`CACHE`]'s hits and misses.
    cache: [Option<Counter>; 2],
}

/// Where a label set's `'static` texts lie: three addresses and a length (see
/// [`Handles::answers`]).
type LabelsAt = (*const u8, *const u8, usize, *const u8);

thread_local! {
    /// Registered once per thread and label set: registering per answer looks the key up
    /// in the recorder's registry (hashing and comparing its labels, and with Prometheus
    /// copying them), which cost more than the rest of a ping (`scripts/load.py
    /// --metrics-cost`).
    static HANDLES: RefCell<Handles> = RefCell::default();
}

/// Runs `record` with this thread's handles for the current recorder.
fn with_handles(record: impl FnOnce(&mut Handles, &dyn metrics::Recorder)) {
    metrics::with_recorder(|recorder| {
        let id = std::ptr::from_ref(recorder).cast::<()>() as usize;
        HANDLES.with_borrow_mut(|handles| {
            if handles.recorder != id {
                *handles = Handles {
                    recorder: id,
                    ..Handles::default()
                };
            }
            record(handles, recorder);
        });
    });
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        in_flight(false);
    }
}

/// This thread's [`IN_FLIGHT`] gauge.
fn in_flight_gauge<'h>(handles: &'h mut Handles, recorder: &dyn metrics::Recorder) -> &'h Gauge {
    static KEY: Key = Key::from_static_name(IN_FLIGHT);
    handles
        .in_flight
        .get_or_insert_with(|| recorder.register_gauge(&KEY, &METADATA))
}

/// Moves the [`IN_FLIGHT`] gauge one up or down.
fn in_flight(up: bool) {
    with_handles(|handles, recorder| {
        let gauge = in_flight_gauge(handles, recorder);
        if up {
            gauge.increment(1.0);
        } else {
            gauge.decrement(1.0);
        }
    });
}

/// Counts a request refused for `reason` (`body_limit`, or a host's own reasons).
pub(crate) fn rejected(reason: &'static str) {
    counter!(REJECTIONS, "reason" => reason).increment(1);
}

/// Creates with an `Idempotency-Key` (counter): `outcome` is `stored` (a new key kept
/// with its book), `replayed` (a kept answer sent again), `conflict` (409: in progress)
/// or `mismatch` (422: the key was used by another request).
pub const IDEMPOTENCY: &str = "books_idempotency_keys_total";

/// Counts a keyed create's outcome.
pub(crate) fn idempotency(outcome: &'static str) {
    counter!(IDEMPOTENCY, "outcome" => outcome).increment(1);
    crate::trace::idempotency(outcome);
}

/// Version checks that dropped every cached answer because what they read may belong
/// to another history, by what they saw (`seen`): `history` (the version names another
/// history: a promoted standby, another server, a restored backup, a database created
/// again) or `count` (the count went back: writes the process had seen are gone)
/// (counter).
pub const CACHE_REWRITES: &str = "books_cache_history_rewrites_total";

/// Counts a drop of every cached answer, by what was `seen`.
pub(crate) fn cache_rewritten(seen: &'static str) {
    counter!(CACHE_REWRITES, "seen" => seen).increment(1);
}

/// Counts a cache lookup.
pub(crate) fn cache(hit: bool) {
    static HIT: [Label; 1] = [Label::from_static_parts("outcome", "hit")];
    static MISS: [Label; 1] = [Label::from_static_parts("outcome", "miss")];
    static KEYS: [Key; 2] = [
        Key::from_static_parts(CACHE, &HIT),
        Key::from_static_parts(CACHE, &MISS),
    ];
    let outcome = usize::from(!hit);
    with_handles(|handles, recorder| {
        handles.cache[outcome]
            .get_or_insert_with(|| recorder.register_counter(&KEYS[outcome], &METADATA))
            .increment(1);
    });
}

/// Runs one store call in a `store` span (`crate::trace`) and records its duration and
/// outcome under `operation`.
pub(crate) async fn store_call<T>(
    operation: &'static str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let span = crate::trace::store_span(operation);
    let started = Instant::now();
    // A span no subscriber wants is not entered around every poll.
    let result = if span.is_disabled() {
        call.await
    } else {
        call.instrument(span.clone()).await
    };
    let outcome = timed(operation, started, &result);
    if outcome != "ok" && outcome != "author_not_found" {
        crate::trace::store_failed(&span, outcome);
    }
    result
}

/// Runs one store call outside any request (readiness), timed as [`store_call`] does
/// but in no span: a probe every few seconds would otherwise start a trace each time.
pub(crate) async fn untraced_store_call<T>(
    operation: &'static str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = call.await;
    timed(operation, started, &result);
    result
}

/// Records a store call's duration and outcome; the outcome's label comes back.
fn timed<T>(
    operation: &'static str,
    started: Instant,
    result: &Result<T, StoreError>,
) -> &'static str {
    let elapsed = started.elapsed();
    let outcome = match result {
        Ok(_) => "ok",
        Err(StoreError::Unavailable(_)) => "unavailable",
        Err(StoreError::AuthorNotFound(_)) => "author_not_found",
        Err(_) => "error",
    };
    let address = (
        operation.as_ptr(),
        outcome.as_ptr(),
        operation.len(),
        std::ptr::null(),
    );
    with_handles(|handles, recorder| {
        let labels = [("operation", operation), ("outcome", outcome)];
        handles
            .stores
            .entry(address)
            .or_insert_with(|| {
                recorder.register_histogram(&Key::from_parts(STORE_DURATION, &labels), &METADATA)
            })
            .record(elapsed);
    });
    outcome
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The status as a label without allocating (the API answers with these only).
fn status_label(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200 => "200",
        201 => "201",
        204 => "204",
        304 => "304",
        400 => "400",
        401 => "401",
        404 => "404",
        405 => "405",
        406 => "406",
        409 => "409",
        412 => "412",
        413 => "413",
        415 => "415",
        422 => "422",
        428 => "428",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}
