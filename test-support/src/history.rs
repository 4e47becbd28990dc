//! A load with a history: keyed writers and readers through the API (in this process, or
//! over HTTP to one or several servers), every request recorded with when it started
//! and ended and what it got, and the checks a failover, a partition or a rollout must
//! pass afterwards ([`nothing_lost_nothing_twice`]): only 200, 201 and 503 with
//! `Retry-After`, every acknowledged create stored exactly once, and no read older than
//! a write acknowledged before it began or newer than the writes begun before it ended.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use books_core::store::{BookStore, ListQuery};
use futures_util::future::BoxFuture;
use http::Request;
use serde_json::Value;

/// How long a client waits for an answer before it counts the request as hung.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends a request: the status, whether it had `Retry-After`, the body as JSON
/// (`Value::Null` if it is not); `None` if no answer came (a connection refused or cut).
pub type Client =
    Arc<dyn Fn(Request<String>) -> BoxFuture<'static, Option<(u16, bool, Value)>> + Send + Sync>;

/// One request of a load: when it started and ended, and what it got.
#[derive(Debug, Clone)]
pub struct Call {
    /// When it was sent.
    pub started: Instant,
    /// When its answer came (or the client gave up).
    pub ended: Instant,
    /// The status (0: no answer, or none within [`CLIENT_TIMEOUT`]).
    pub status: u16,
    /// Whether a 503 had `Retry-After`.
    pub retry: bool,
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
pub struct Seen {
    /// The books there were as the load began.
    before: u64,
    /// Every request.
    pub calls: Vec<Call>,
    /// Each key's acknowledged book (title, id).
    pub acknowledged: Vec<(String, i64)>,
}

impl Seen {
    /// Answers by status.
    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        let mut statuses = BTreeMap::new();
        for call in &self.calls {
            *statuses.entry(call.status).or_default() += 1;
        }
        statuses
    }

    /// When the first create acknowledged after `since` was answered.
    pub fn first_created_after(&self, since: Instant) -> Option<Instant> {
        let acknowledged = self.calls.iter().filter(|c| c.status == 201);
        acknowledged.map(|c| c.ended).filter(|at| *at > since).min()
    }

    /// The longest any request waited for its answer.
    pub fn longest(&self) -> Duration {
        let waits = self.calls.iter().map(|c| c.ended - c.started);
        waits.max().unwrap_or_default()
    }

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

/// Writers and readers until [`stop`](Self::stop), every request recorded, each sent
/// through the next of the load's clients in turn. Each create's key and title are the
/// same (`{run}-{writer}-{n}`), sent again (through the next client) after a 503 or no
/// answer until answered; readers get the book last acknowledged as they begin (or the
/// one given), or list the first page.
pub struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    clients: Arc<Mutex<Vec<Client>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts `writers` and `readers` through `clients`, creating books of `author`;
    /// `book`: one the readers get until a create is acknowledged.
    pub async fn start(
        clients: Vec<Client>,
        (author, book): (i64, i64),
        run: &str,
        writers: usize,
        readers: usize,
    ) -> Self {
        let first = Request::get("/api/books").body(String::new()).unwrap();
        let (status, _, page) = (clients[0])(first).await.expect("the first page");
        assert_eq!(status, 200, "the first page before the load");
        let before = page["meta"]["total"].as_u64().expect("a total");
        let load = Self {
            stop: Arc::new(AtomicBool::new(false)),
            seen: Arc::new(Mutex::new(Seen {
                before,
                ..Seen::default()
            })),
            clients: Arc::new(Mutex::new(clients)),
            tasks: Vec::new(),
        };
        let mut tasks = Vec::new();
        for writer in 0..writers {
            let run = format!("{run}-{writer}");
            tasks.push(tokio::spawn(load.writer(run, author)));
        }
        for reader in 0..readers {
            tasks.push(tokio::spawn(load.reader(reader % 2 == 0, book)));
        }
        Self { tasks, ..load }
    }

    /// From now on, requests go through `clients` (a server joining, or leaving before
    /// it stops).
    pub fn use_clients(&self, clients: Vec<Client>) {
        *self.clients.lock().unwrap() = clients;
    }

    /// Sends `request` through the next client, within [`CLIENT_TIMEOUT`]; records it.
    fn sender(&self) -> impl Fn(Request<String>, What) -> BoxFuture<'static, (u16, Value)> + use<> {
        let (clients, seen) = (self.clients.clone(), self.seen.clone());
        let turn = Arc::new(AtomicUsize::new(0));
        move |request, what| {
            let client = {
                let clients = clients.lock().unwrap();
                clients[turn.fetch_add(1, Ordering::Relaxed) % clients.len()].clone()
            };
            let seen = seen.clone();
            Box::pin(async move {
                let started = Instant::now();
                let answer = tokio::time::timeout(CLIENT_TIMEOUT, client(request)).await;
                let (status, retry, json) =
                    answer.ok().flatten().unwrap_or((0, false, Value::Null));
                let what = match what {
                    What::Create { title, .. } => {
                        let id = (status == 201).then(|| json["id"].as_i64().expect("an id"));
                        What::Create { title, id }
                    }
                    What::List { .. } => What::List {
                        total: json["meta"]["total"].as_u64(),
                    },
                    get => get,
                };
                seen.lock().unwrap().record(started, status, retry, what);
                (status, json)
            })
        }
    }

    fn writer(&self, run: String, author: i64) -> impl Future<Output = ()> + use<> {
        let (send, stop) = (self.sender(), self.stop.clone());
        async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let title = format!("{run}-{n}");
                let body = format!("title={title}&author_id={author}&year=2020");
                loop {
                    let request = Request::post("/api/books")
                        .header("idempotency-key", &title)
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(body.clone())
                        .unwrap();
                    let what = What::Create {
                        title: title.clone(),
                        id: None,
                    };
                    let (status, _) = send(request, what).await;
                    if status == 201 || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                n += 1;
            }
        }
    }

    fn reader(&self, lists: bool, book: i64) -> impl Future<Output = ()> + use<> {
        let (send, stop, seen) = (self.sender(), self.stop.clone(), self.seen.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                let last = seen.lock().unwrap().acknowledged.last().map(|b| b.1);
                let id = last.unwrap_or(book);
                let (path, what) = if lists {
                    ("/api/books".to_owned(), What::List { total: None })
                } else {
                    (format!("/api/books/{id}"), What::Get { id })
                };
                let request = Request::get(&path).body(String::new()).unwrap();
                send(request, what).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    /// Stops the load and hands over what it saw.
    pub async fn stop(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("a load task");
        }
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// Waits up to `within` for a create acknowledged after `since`; how long it took.
    pub async fn writes_resume(&self, since: Instant, within: Duration) -> Duration {
        while self
            .seen
            .lock()
            .unwrap()
            .first_created_after(since)
            .is_none()
        {
            assert!(
                since.elapsed() < within,
                "no create acknowledged within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        since.elapsed()
    }
}

/// The checks every event keeps: only 200, 201 and 503 (each with `Retry-After`), no
/// request without an answer; every acknowledged book in `store` once, under its title;
/// no title twice; and no read that disagrees with the writes around it: a get of a
/// book acknowledged before it began finds it (200, or a 503), and a page's total is at
/// least the books acknowledged before it began (with those there before the load) and
/// at most the books whose create had begun before it ended.
pub async fn nothing_lost_nothing_twice(store: &impl BookStore, seen: &Seen) {
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
    let problems = disagreements(seen);
    assert!(problems.is_empty(), "reads that disagree: {problems:?}");
}

/// The reads of `seen` that disagree with the writes around them.
fn disagreements(seen: &Seen) -> Vec<String> {
    let acknowledged: Vec<Instant> = seen
        .calls
        .iter()
        .filter(|c| c.status == 201)
        .map(|c| c.ended)
        .collect();
    let mut problems = Vec::new();
    for call in &seen.calls {
        match &call.what {
            What::Get { id } if call.status == 404 => {
                problems.push(format!("book {id}, acknowledged before, answered 404"));
            }
            What::List { total: Some(total) } if call.status == 200 => {
                let known = acknowledged.iter().filter(|at| **at < call.started).count();
                let begun = keys_begun_before(seen, call.ended);
                if *total < seen.before + known as u64 {
                    problems.push(format!(
                        "a total of {total} after {known} creates had been acknowledged \
                         (and {} books were there)",
                        seen.before
                    ));
                }
                if *total > seen.before + begun {
                    problems.push(format!(
                        "a total of {total} while only {begun} creates had begun"
                    ));
                }
            }
            _ => {}
        }
    }
    problems
}

/// How many distinct keys had a create begun before `at`.
fn keys_begun_before(seen: &Seen, at: Instant) -> u64 {
    let keys: BTreeSet<&str> = seen
        .calls
        .iter()
        .filter_map(|c| match &c.what {
            What::Create { title, .. } if c.started < at => Some(title.as_str()),
            _ => None,
        })
        .collect();
    keys.len() as u64
}
