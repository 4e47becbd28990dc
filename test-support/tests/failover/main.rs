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

/// What a load saw.
#[derive(Debug, Default)]
struct Seen {
    /// Answers by status.
    statuses: BTreeMap<u16, u64>,
    /// 503s without `Retry-After`.
    bare_503: u64,
    /// Each key's acknowledged book (title, id).
    acknowledged: Vec<(String, i64)>,
    /// When each 201 came.
    created_at: Vec<Instant>,
}

impl Seen {
    /// Counts an answer; `created`: the key's book it acknowledged.
    fn record(&mut self, status: u16, retry: bool, created: Option<(String, i64)>) {
        *self.statuses.entry(status).or_default() += 1;
        self.bare_503 += u64::from(status == 503 && !retry);
        if let Some(book) = created {
            self.acknowledged.push(book);
            self.created_at.push(Instant::now());
        }
    }
}

/// Writers and readers through `api`, until `stop`; each create's key and title are the
/// same (`{run}-{writer}-{n}`), sent again after a 503 until answered or `stop`.
struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `book`: one the readers get (the others list).
    fn start(
        api: &BooksApi,
        (author, book): (i64, i64),
        run: &str,
        writers: usize,
        readers: usize,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut tasks = Vec::new();
        for writer in 0..writers {
            let (api, stop, seen, run) = (api.clone(), stop.clone(), seen.clone(), run.to_owned());
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let title = format!("{run}-{writer}-{n}");
                    let body = format!("title={title}&author_id={author}&year=2020");
                    loop {
                        let headers = [("idempotency-key", title.as_str())];
                        let (status, retry, json) =
                            call(&api, "POST", "/api/books", &headers, &body).await;
                        let created = (status == 201).then(|| {
                            let id = json["id"].as_i64().expect("an id");
                            (title.clone(), id)
                        });
                        let done = created.is_some();
                        seen.lock().unwrap().record(status, retry, created);
                        if done || stop.load(Ordering::Relaxed) {
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
                    let path = if reader % 2 == 0 {
                        "/api/books".to_owned()
                    } else {
                        format!("/api/books/{book}")
                    };
                    let (status, retry, _) = call(&api, "GET", &path, &[], "").await;
                    seen.lock().unwrap().record(status, retry, None);
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
            .created_at
            .iter()
            .any(|at| *at > since)
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

/// The checks every failover keeps: only 200, 201 and 503 (each with `Retry-After`);
/// every acknowledged book in `store` once, under its title; no title twice.
async fn nothing_lost_nothing_twice(store: &impl BookStore, seen: &Seen) {
    let unexpected: Vec<_> = seen
        .statuses
        .keys()
        .filter(|s| ![200, 201, 503].contains(*s))
        .collect();
    assert!(
        unexpected.is_empty(),
        "answers other than 200/201/503: {:?}",
        seen.statuses
    );
    assert_eq!(seen.bare_503, 0, "every 503 has Retry-After");
    assert!(
        !seen.acknowledged.is_empty(),
        "some creates were acknowledged: {:?}",
        seen.statuses
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
