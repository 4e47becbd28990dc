//! The SQL stores through a failover, on real clusters: a pg_auto_failover formation
//! (a planned switchover, a killed primary), PostgreSQL and MariaDB replicas promoted
//! after the primary lost writes they never got (the history rewritten), and a Galera
//! cluster (reads on another node, a node killed). Each test needs its cluster's tools
//! and shows as ignored without them, except under `CI=true` (`gates.rs`).
//!
//! The load: writers creating books with an `Idempotency-Key` through the API (each 503
//! sent again with the same key until it is answered), readers listing and getting; the
//! checks: only 200, 201 and 503 (with `Retry-After`), every acknowledged book in the
//! database once, no key's book twice, and writes answered again after the event.

mod galera;
mod partition;
mod postgres;
mod rewrite;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use books_core::BooksApi;
use books_core::store::{AuthorStore, BookStore, ListQuery};
use http::Request;
use serde_json::Value;

/// Sends `method path body` (a form) through `api`: the status, `Retry-After`, the JSON.
async fn call(
    api: &BooksApi,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, bool, Value) {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = api.handle(request.body(body.to_owned()).unwrap()).await;
    let retry = response.headers().contains_key("retry-after");
    let json = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
    (response.status().as_u16(), retry, json)
}

/// How long a client waits for an answer before it counts the request as hung.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// One request of a load: when it started and ended, and what it got.
#[derive(Debug, Clone)]
struct Call {
    started: Instant,
    ended: Instant,
    /// The status (0: no answer within [`CLIENT_TIMEOUT`]), and whether a 503 had
    /// `Retry-After`.
    status: u16,
    retry: bool,
    what: What,
}

/// What a request asked, and what its answer said.
#[derive(Debug, Clone)]
enum What {
    /// A create with its key (the title): the id of the book a 201 acknowledged.
    Create { title: String, id: Option<i64> },
    /// A book acknowledged before the read began (or the one there before the load).
    Get { id: i64 },
    /// The list's first page: `meta.total` of a 200.
    List { total: Option<u64> },
}

/// What a load saw: every request, in the order each ended.
#[derive(Debug, Default)]
struct Seen {
    /// The books there were as the load began.
    before: u64,
    calls: Vec<Call>,
    /// Each key's acknowledged book (title, id).
    acknowledged: Vec<(String, i64)>,
}

impl Seen {
    /// Answers by status.
    fn statuses(&self) -> BTreeMap<u16, u64> {
        let mut statuses = BTreeMap::new();
        for call in &self.calls {
            *statuses.entry(call.status).or_default() += 1;
        }
        statuses
    }

    /// When the first create acknowledged after `since` was answered.
    fn first_created_after(&self, since: Instant) -> Option<Instant> {
        self.calls
            .iter()
            .filter(|c| c.status == 201 && c.ended > since)
            .map(|c| c.ended)
            .min()
    }

    /// The longest any request waited for its answer.
    fn longest(&self) -> Duration {
        let waits = self.calls.iter().map(|c| c.ended - c.started);
        waits.max().unwrap_or_default()
    }
}

/// `request` through `api` within [`CLIENT_TIMEOUT`]: the status (0 if none came),
/// `Retry-After`, the JSON.
async fn timed_call(api: &BooksApi, request: Request<String>) -> (u16, bool, Value) {
    match tokio::time::timeout(CLIENT_TIMEOUT, api.handle(request)).await {
        Ok(response) => {
            let retry = response.headers().contains_key("retry-after");
            let json = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
            (response.status().as_u16(), retry, json)
        }
        Err(_) => (0, false, Value::Null),
    }
}

/// Writers and readers through `api`, until `stop`, every request recorded. Each
/// create's key and title are the same (`{run}-{writer}-{n}`), sent again after a 503
/// until answered or `stop`; readers get the book last acknowledged as they begin (or
/// `book`), or list the first page.
struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `book`: one the readers get until a create is acknowledged.
    async fn start(
        api: &BooksApi,
        (author, book): (i64, i64),
        run: &str,
        writers: usize,
        readers: usize,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (status, _, page) = call(api, "GET", "/api/books", &[], "").await;
        assert_eq!(status, 200, "the first page before the load");
        let before = page["meta"]["total"].as_u64().expect("a total");
        let seen = Arc::new(Mutex::new(Seen {
            before,
            ..Seen::default()
        }));
        let mut tasks = Vec::new();
        for writer in 0..writers {
            let (api, stop, seen, run) = (api.clone(), stop.clone(), seen.clone(), run.to_owned());
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let title = format!("{run}-{writer}-{n}");
                    let body = format!("title={title}&author_id={author}&year=2020");
                    loop {
                        let request = Request::post("/api/books")
                            .header("idempotency-key", &title)
                            .body(body.clone())
                            .unwrap();
                        let started = Instant::now();
                        let (status, retry, json) = timed_call(&api, request).await;
                        let id = (status == 201).then(|| json["id"].as_i64().expect("an id"));
                        let what = What::Create {
                            title: title.clone(),
                            id,
                        };
                        seen.lock().unwrap().record(started, status, retry, what);
                        if id.is_some() || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    n += 1;
                }
            }));
        }
        for reader in 0..readers {
            let (api, stop, seen) = (api.clone(), stop.clone(), seen.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let last = seen.lock().unwrap().acknowledged.last().map(|b| b.1);
                    let id = last.unwrap_or(book);
                    let path = if reader % 2 == 0 {
                        "/api/books".to_owned()
                    } else {
                        format!("/api/books/{id}")
                    };
                    let request = Request::get(&path).body(String::new()).unwrap();
                    let started = Instant::now();
                    let (status, retry, json) = timed_call(&api, request).await;
                    let what = if reader % 2 == 0 {
                        What::List {
                            total: json["meta"]["total"].as_u64(),
                        }
                    } else {
                        What::Get { id }
                    };
                    seen.lock().unwrap().record(started, status, retry, what);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }));
        }
        Self { stop, seen, tasks }
    }

    /// Stops the load and hands over what it saw.
    async fn stop(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("a load task");
        }
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// Whether a create was acknowledged after `since`.
    fn created_since(&self, since: Instant) -> bool {
        self.seen
            .lock()
            .unwrap()
            .first_created_after(since)
            .is_some()
    }
}

impl Seen {
    /// Records a request that started at `started` and ended now.
    fn record(&mut self, started: Instant, status: u16, retry: bool, what: What) {
        if let What::Create {
            title,
            id: Some(id),
        } = &what
        {
            self.acknowledged.push((title.clone(), *id));
        }
        let ended = Instant::now();
        self.calls.push(Call {
            started,
            ended,
            status,
            retry,
            what,
        });
    }
}

/// Waits up to `within` for a create acknowledged after `since`; how long it took.
async fn writes_resume(load: &Load, since: Instant, within: Duration) -> Duration {
    while !load.created_since(since) {
        assert!(
            since.elapsed() < within,
            "no create acknowledged within {within:?} of the new primary"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    since.elapsed()
}

/// The checks every failover keeps: only 200, 201 and 503 (each with `Retry-After`), no
/// request without an answer; every acknowledged book in `store` once, under its title;
/// no title twice; and the history of reads (`histories_agree`).
async fn nothing_lost_nothing_twice(store: &impl BookStore, seen: &Seen) {
    let statuses = seen.statuses();
    let unexpected: Vec<_> = statuses
        .keys()
        .filter(|s| ![200, 201, 503].contains(*s))
        .collect();
    assert!(
        unexpected.is_empty(),
        "answers other than 200/201/503 (0: none within {CLIENT_TIMEOUT:?}): {statuses:?}"
    );
    let bare = seen.calls.iter().filter(|c| c.status == 503 && !c.retry);
    assert_eq!(bare.count(), 0, "every 503 has Retry-After");
    assert!(
        !seen.acknowledged.is_empty(),
        "some creates were acknowledged: {statuses:?}"
    );
    let books = store
        .list(&ListQuery::new(0, 1_000_000))
        .await
        .expect("the books after");
    let mut titles: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for book in &books.books {
        titles.entry(book.title.as_str()).or_default().push(book.id);
    }
    let twice: Vec<_> = titles.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(twice.is_empty(), "keys stored twice: {twice:?}");
    for (title, id) in &seen.acknowledged {
        assert_eq!(
            titles.get(title.as_str()),
            Some(&vec![*id]),
            "acknowledged {title} (id {id}) is there once"
        );
    }
    histories_agree(seen);
}

/// No read answers a value that was never committed or that a completed write had
/// already replaced: a get of a book acknowledged before it began finds it (200, or a
/// 503), and a page's total is at least the books acknowledged before it began (and the
/// books there were before the load) and at most the books whose create had begun
/// before it ended.
fn histories_agree(seen: &Seen) {
    let before = seen.before;
    let mut creates: Vec<&Call> = seen
        .calls
        .iter()
        .filter(|c| matches!(c.what, What::Create { .. }))
        .collect();
    creates.sort_by_key(|c| c.ended);
    let mut problems = Vec::new();
    for call in &seen.calls {
        match &call.what {
            What::Get { id } if call.status == 404 => {
                problems.push(format!("book {id}, acknowledged before, answered 404"));
            }
            What::List { total: Some(total) } if call.status == 200 => {
                let acknowledged_before = creates
                    .iter()
                    .filter(|c| c.status == 201 && c.ended < call.started)
                    .count() as u64;
                let begun_before = keys_begun_before(seen, call.ended);
                if *total < before + acknowledged_before {
                    problems.push(format!(
                        "a total of {total} after {acknowledged_before} creates had been \
                         acknowledged (and {before} books were there)"
                    ));
                }
                if *total > before + begun_before {
                    problems.push(format!(
                        "a total of {total} while only {begun_before} creates had begun"
                    ));
                }
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "reads that disagree: {problems:?}");
}

/// How many distinct keys had a create begun before `at`.
fn keys_begun_before(seen: &Seen, at: Instant) -> u64 {
    let keys: std::collections::BTreeSet<&str> = seen
        .calls
        .iter()
        .filter_map(|c| match &c.what {
            What::Create { title, .. } if c.started < at => Some(title.as_str()),
            _ => None,
        })
        .collect();
    keys.len() as u64
}

/// An author of the store's, and a book of hers (for the readers).
async fn seeded(store: &(impl AuthorStore + BookStore)) -> (i64, i64) {
    let author = store.add_author(Some("Failover")).await.expect("an author");
    let book = books_core::store::BookInput {
        title: "Before".into(),
        author_id: author,
        year: 2020,
    };
    let book = store
        .create(&book, chrono::Utc::now())
        .await
        .expect("a book");
    (author, book.id)
}
