//! The host search against fake servers (books-test-support's [`FakeServer`]): which
//! host each `target_session_attrs` takes, in the URL's order whatever order the answers
//! come in; what a search that finds none says of each host; role flips; callers that
//! give up mid-search; callers that arrive together; the bounds of every wait; a search
//! cut short by its runtime; a pool timeout; a store's start. One file (about 500
//! lines): every case shares the fakes' setup at its top, each reads alone, and split by
//! concern the parts would each import that setup for a few cases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use books_core::store::Unready;
use books_test_support::{Answer, FakeServer, Protocol};
use sqlx::Pool;
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, Postgres};

use super::{Bounds, Hosts};
use crate::servers::roles::SessionAttrs;
use crate::servers::{ConnectOptionsOf, Networked};

/// Short bounds: a silent host costs 200 ms.
const BOUNDS: Bounds = Bounds {
    probe: Duration::from_millis(200),
    retry_after: Duration::from_millis(100),
    wait: Duration::from_secs(1),
};

/// A database the fakes can stand for.
trait Fake: Networked {
    const PROTOCOL: Protocol;
    fn options(port: u16) -> ConnectOptionsOf<Self>;
    fn lazy_pool(options: ConnectOptionsOf<Self>) -> Pool<Self>;
    fn port(pool: &Pool<Self>) -> u16;
}

impl Fake for Postgres {
    const PROTOCOL: Protocol = Protocol::Postgres;
    fn options(port: u16) -> PgConnectOptions {
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(port)
            .username("books")
            .database("books")
    }
    fn lazy_pool(options: PgConnectOptions) -> Pool<Self> {
        PgPoolOptions::new().connect_lazy_with(options)
    }
    fn port(pool: &Pool<Self>) -> u16 {
        pool.connect_options().get_port()
    }
}

impl Fake for MySql {
    const PROTOCOL: Protocol = Protocol::MySql;
    fn options(port: u16) -> MySqlConnectOptions {
        MySqlConnectOptions::new()
            .host("127.0.0.1")
            .port(port)
            .username("books")
            .database("books")
    }
    fn lazy_pool(options: MySqlConnectOptions) -> Pool<Self> {
        MySqlPoolOptions::new().connect_lazy_with(options)
    }
    fn port(pool: &Pool<Self>) -> u16 {
        pool.connect_options().get_port()
    }
}

/// Fakes answering `answers`, and the hosts of a pool over them wanting `attrs`.
struct Setup<DB: Fake> {
    fakes: Vec<FakeServer>,
    hosts: Arc<Hosts<DB>>,
    pool: Pool<DB>,
}

impl<DB: Fake> Setup<DB> {
    fn new(answers: &[Answer], attrs: SessionAttrs) -> Self {
        Self::with_bounds(answers, attrs, BOUNDS)
    }

    fn with_bounds(answers: &[Answer], attrs: SessionAttrs, bounds: Bounds) -> Self {
        let fakes: Vec<FakeServer> = answers
            .iter()
            .map(|answer| FakeServer::start(DB::PROTOCOL, *answer))
            .collect();
        let options = fakes.iter().map(|fake| DB::options(fake.port())).collect();
        let hosts = Arc::new(Hosts::<DB>::with_bounds(options, attrs, bounds));
        let pool = DB::lazy_pool(hosts.first());
        Self { fakes, hosts, pool }
    }

    async fn ready(&self) -> Result<(), Unready> {
        self.hosts.ready(&self.pool).await.map(drop)
    }

    /// The pool's host failed for a caller working now.
    fn lost(&self) {
        self.hosts.lost(self.hosts.generation().now());
    }

    /// The index of the fake the pool connects to.
    fn chosen(&self) -> usize {
        let port = DB::port(&self.pool);
        self.fakes.iter().position(|f| f.port() == port).unwrap()
    }
}

/// Which host `attrs` takes among `answers`, or why none.
async fn choice<DB: Fake>(answers: &[Answer], attrs: SessionAttrs) -> Result<usize, Unready> {
    let setup = Setup::<DB>::new(answers, attrs);
    setup.ready().await.map(|()| setup.chosen())
}

use Answer::{BadPassword, CloseMidProbe, NotSynced, Primary, ReadOnly, Refuse, Silent, Standby};
use SessionAttrs::{Any, PreferStandby, ReadWrite, Standby as InRecovery};

/// Every `target_session_attrs` against the same mixes of servers, as libpq chooses.
async fn every_attrs_chooses_as_libpq<DB: Fake>() {
    let cases: &[(&[Answer], SessionAttrs, Result<usize, Unready>)] = &[
        (&[Primary, Standby], ReadWrite, Ok(0)),
        (&[Standby, Primary], ReadWrite, Ok(1)),
        (&[Standby, ReadOnly, Primary], ReadWrite, Ok(2)),
        (&[Standby, Primary], Any, Ok(0)),
        (&[Refuse, Standby], Any, Ok(1)),
        (&[Primary, Standby], SessionAttrs::ReadOnly, Ok(1)),
        (&[Primary, ReadOnly], SessionAttrs::ReadOnly, Ok(1)),
        (&[Primary, Standby], InRecovery, Ok(1)),
        (&[Primary, Standby], PreferStandby, Ok(1)),
        (&[Refuse, Primary, Primary], PreferStandby, Ok(1)),
        (
            &[Standby, Standby],
            ReadWrite,
            Err(Unready::WrongRole("read-write")),
        ),
        (&[Primary], InRecovery, Err(Unready::WrongRole("standby"))),
        (&[Refuse, Refuse], Any, Err(Unready::Unreachable)),
        (&[Refuse, Refuse], PreferStandby, Err(Unready::Unreachable)),
    ];
    for (answers, attrs, expected) in cases {
        let chosen = choice::<DB>(answers, *attrs).await;
        assert_eq!(&chosen, expected, "{answers:?} wanting {attrs:?}");
    }
}

#[tokio::test]
async fn postgres_every_attrs_chooses_as_libpq() {
    every_attrs_chooses_as_libpq::<Postgres>().await;
    // Read-only, not in recovery: a primary for `primary`, not for `read-write`.
    let chosen = choice::<Postgres>(&[Standby, ReadOnly, Primary], SessionAttrs::Primary).await;
    assert_eq!(chosen, Ok(1));
}

#[tokio::test]
async fn mysql_every_attrs_chooses_as_libpq() {
    every_attrs_chooses_as_libpq::<MySql>().await;
    // MariaDB's read-only is its replicas' mark: a replica for `primary`.
    let chosen = choice::<MySql>(&[Standby, ReadOnly, Primary], SessionAttrs::Primary).await;
    assert_eq!(chosen, Ok(2));
    // A Galera node out of sync takes no writes and is no replica.
    let chosen = choice::<MySql>(&[NotSynced, Primary], ReadWrite).await;
    assert_eq!(chosen, Ok(1));
    let chosen = choice::<MySql>(&[NotSynced, Standby], SessionAttrs::Primary).await;
    assert_eq!(chosen, Ok(0));
}

/// The URL's order holds whatever order the answers come in: a silent first host is
/// waited for (its probe's bound), a silent later one is not.
#[tokio::test]
async fn the_first_host_in_order_wins_and_only_hosts_before_it_are_waited_for() {
    let probe = Duration::from_secs(1);
    let chosen = |answers: &'static [Answer]| async move {
        let fakes: Vec<FakeServer> = answers
            .iter()
            .map(|a| FakeServer::start(Protocol::Postgres, *a))
            .collect();
        let options = fakes.iter().map(|f| Postgres::options(f.port())).collect();
        let bounds = Bounds {
            probe,
            wait: probe * 3,
            ..BOUNDS
        };
        let hosts = Arc::new(Hosts::<Postgres>::with_bounds(options, ReadWrite, bounds));
        let pool = Postgres::lazy_pool(hosts.first());
        let started = Instant::now();
        hosts.ready(&pool).await.unwrap();
        let port = pool.connect_options().get_port();
        let index = fakes.iter().position(|f| f.port() == port).unwrap();
        (index, started.elapsed())
    };
    let (index, took) = chosen(&[Primary, Silent]).await;
    assert_eq!(index, 0);
    assert!(
        took < probe / 2,
        "the silent second host was not waited for: {took:?}"
    );
    let (index, took) = chosen(&[Silent, Primary]).await;
    assert_eq!(index, 1);
    assert!(
        took >= probe,
        "the silent first host was waited for: {took:?}"
    );
    // Two silent hosts cost one bound, not two: they are asked at once.
    let (index, took) = chosen(&[Silent, Silent, Primary]).await;
    assert_eq!(index, 2);
    assert!(took < probe * 2, "{took:?}");
}

/// A search that finds none names each host and what it was found to be.
async fn a_failed_search_says_what_each_host_was<DB: Fake>() {
    let setup = Setup::<DB>::new(
        &[Refuse, Silent, BadPassword, CloseMidProbe, Standby],
        ReadWrite,
    );
    assert_eq!(setup.ready().await, Err(Unready::WrongRole("read-write")));
    let report = setup.hosts.report();
    let parts: Vec<&str> = report.split("; ").collect();
    assert_eq!(parts.len(), 5, "{report}");
    let f = &setup.fakes;
    let expect = [
        format!("{} refused the connection", f[0].address()),
        format!("{} did not answer in time", f[1].address()),
        format!("{} refused the login: ", f[2].address()),
        format!("{} failed: ", f[3].address()),
        format!("{}: a standby", f[4].address()),
    ];
    for (part, expected) in parts.iter().zip(&expect) {
        assert!(
            part.starts_with(expected.as_str()),
            "{part:?} starts {expected:?}"
        );
    }
}

#[tokio::test]
async fn postgres_a_failed_search_says_what_each_host_was() {
    a_failed_search_says_what_each_host_was::<Postgres>().await;
}

#[tokio::test]
async fn mysql_a_failed_search_says_what_each_host_was() {
    a_failed_search_says_what_each_host_was::<MySql>().await;
}

/// A primary that becomes a standby while another is promoted: the pool moves there,
/// every connection opened before is stale (the version check's too), and a late
/// failure of the host left does not move it again.
#[tokio::test]
async fn a_role_flip_moves_the_pool_and_drops_its_connections() {
    let setup = Setup::<Postgres>::new(&[Primary, Standby], ReadWrite);
    setup.ready().await.unwrap();
    assert_eq!(setup.chosen(), 0);
    let generation = setup.hosts.generation().now();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let opened_before = Instant::now();
    setup.fakes[0].set(Standby);
    setup.fakes[1].set(Primary);
    // Until a failure says so, the pool stays.
    setup.ready().await.unwrap();
    assert_eq!(setup.chosen(), 0);
    setup.lost();
    assert!(
        !setup.hosts.current(opened_before.elapsed()),
        "stale at once"
    );
    setup.ready().await.unwrap();
    assert_eq!(setup.chosen(), 1);
    let port = setup.fakes[1].port();
    assert_eq!(
        setup.hosts.current_server(),
        Some(("127.0.0.1", port)),
        "for the traces"
    );
    assert!(setup.hosts.generation().now() > generation);
    assert!(
        setup.hosts.current(Duration::ZERO),
        "a new connection is current"
    );
    // A failure of a request begun on the host left, coming in late, changes nothing:
    // the new host's connections stay and no search starts.
    let moved = setup.hosts.generation().now();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let opened_after = Instant::now();
    setup.hosts.lost(generation);
    assert!(setup.hosts.current(opened_after.elapsed()), "still current");
    assert_eq!(setup.hosts.generation().now(), moved);
    // A second loss while the first search's result stands changes nothing twice.
    setup.lost();
    setup.lost();
    setup.ready().await.unwrap();
    assert_eq!(setup.chosen(), 1);
}

/// The case: the primary killed, four callers giving up mid-search (a readiness
/// probe's limit, a client hanging up), then the standby promoted: the next caller finds
/// it, well within 2 s. (The search ran inside the first caller's future: dropping it
/// left "a search under way" for good.)
async fn callers_that_give_up_do_not_stop_the_search<DB: Fake>() {
    let setup = Setup::<DB>::new(&[Primary, Silent, Silent, Standby], ReadWrite);
    setup.ready().await.unwrap();
    setup.fakes[0].set(Refuse);
    setup.lost();
    for _ in 0..4 {
        let gave_up = tokio::time::timeout(Duration::from_millis(30), setup.ready()).await;
        assert!(gave_up.is_err(), "the caller gave up mid-search");
    }
    setup.fakes[3].set(Primary);
    let promoted = Instant::now();
    loop {
        match setup.ready().await {
            Ok(()) => break,
            Err(_) => {
                assert!(
                    promoted.elapsed() < Duration::from_secs(2),
                    "found within 2 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    assert_eq!(setup.chosen(), 3);
    eprintln!("found {:?} after the promotion", promoted.elapsed());
}

#[tokio::test]
async fn postgres_callers_that_give_up_do_not_stop_the_search() {
    callers_that_give_up_do_not_stop_the_search::<Postgres>().await;
}

#[tokio::test]
async fn mysql_callers_that_give_up_do_not_stop_the_search() {
    callers_that_give_up_do_not_stop_the_search::<MySql>().await;
}

/// Callers that arrive together share one search: each host is asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_arrive_together_share_one_search() {
    let setup = Arc::new(Setup::<Postgres>::new(&[Standby, Primary], ReadWrite));
    let callers: Vec<_> = (0..20)
        .map(|_| {
            let setup = setup.clone();
            tokio::spawn(async move { setup.ready().await })
        })
        .collect();
    for caller in callers {
        assert_eq!(caller.await.unwrap(), Ok(()));
    }
    let asked: Vec<usize> = setup.fakes.iter().map(FakeServer::accepted).collect();
    assert_eq!(asked, [1, 1], "one search for twenty callers");
}

/// After a search that found none, callers are refused at once (no host asked) until
/// the retry interval has passed; then one looks again.
#[tokio::test]
async fn after_a_search_that_found_none_callers_are_refused_at_once() {
    let setup = Setup::<Postgres>::new(&[Standby], ReadWrite);
    assert!(setup.ready().await.is_err());
    assert_eq!(setup.fakes[0].accepted(), 1);
    let refused = Instant::now();
    for _ in 0..10 {
        assert_eq!(setup.ready().await, Err(Unready::WrongRole("read-write")));
    }
    assert!(
        refused.elapsed() < BOUNDS.retry_after,
        "{:?}",
        refused.elapsed()
    );
    assert_eq!(setup.fakes[0].accepted(), 1, "no host asked meanwhile");
    tokio::time::sleep(BOUNDS.retry_after).await;
    setup.fakes[0].set(Primary);
    assert_eq!(setup.ready().await, Ok(()));
    assert_eq!(setup.fakes[0].accepted(), 2);
}

/// A caller waits for a search at most its bound, even when the search takes longer.
#[tokio::test]
async fn a_caller_waits_for_a_search_at_most_its_bound() {
    let bounds = Bounds {
        probe: Duration::from_secs(5),
        wait: Duration::from_millis(150),
        ..BOUNDS
    };
    let setup = Setup::<Postgres>::with_bounds(&[Silent], ReadWrite, bounds);
    let started = Instant::now();
    assert_eq!(setup.ready().await, Err(Unready::Unreachable));
    let waited = started.elapsed();
    assert!(
        waited >= bounds.wait && waited < bounds.wait * 3,
        "{waited:?}"
    );
}

/// A search whose runtime shuts down mid-search (a store first used inside a runtime of
/// its own, which then ends) leaves no search "running": the next caller starts another.
#[test]
fn a_search_cut_short_by_its_runtime_does_not_stop_the_next() {
    let bounds = Bounds {
        probe: Duration::from_secs(5),
        wait: Duration::from_millis(100),
        ..BOUNDS
    };
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    };
    let first = runtime();
    let setup = {
        let _entered = first.enter();
        Setup::<Postgres>::with_bounds(&[Silent], ReadWrite, bounds)
    };
    assert_eq!(first.block_on(setup.ready()), Err(Unready::Unreachable));
    drop(first); // the search, still asking the silent host, ends with it
    setup.fakes[0].set(Primary);
    runtime().block_on(async {
        let started = Instant::now();
        while setup.ready().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "found within 2 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// A request that gets no pooled connection in time (the pool's host accepts and never
/// answers) has the host asked its role on a connection of its own; it does not answer,
/// so the next request looks again and the pool moves to the new primary. (Only work
/// that overran `PRIMARY_TIMEOUT` did that: the pool's timeout comes first, and a
/// process without a version check answered 503 for good.)
#[tokio::test]
async fn a_pool_timeout_has_the_host_asked_its_role() {
    let fakes = [
        FakeServer::start(Protocol::Postgres, Primary),
        FakeServer::start(Protocol::Postgres, Standby),
    ];
    let store = crate::PostgresStore::connect_lazy(&url_of(&fakes)).unwrap();
    store.wait_for_primary(Duration::ZERO).await.unwrap();
    fakes[0].set(Silent);
    fakes[1].set(Primary);
    let failed = books_core::store::AuthorStore::add_author(&store, Some("A")).await;
    assert!(
        matches!(failed, Err(books_core::store::StoreError::Unavailable(_))),
        "{failed:?}"
    );
    let timed_out = Instant::now();
    loop {
        let _ = store.wait_for_primary(Duration::ZERO).await;
        if store.pool().connect_options().get_port() == fakes[1].port() {
            break;
        }
        assert!(
            timed_out.elapsed() < Duration::from_secs(3),
            "moved within 3 s of the pool's timeout"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The store's own start: `wait_for_primary` names each host when none will do, and a
/// URL whose first host is down or a standby starts on the one that takes writes.
#[tokio::test]
async fn a_store_starts_on_whichever_host_is_the_primary() {
    let fakes = [
        FakeServer::start(Protocol::Postgres, Refuse),
        FakeServer::start(Protocol::Postgres, Standby),
        FakeServer::start(Protocol::Postgres, Standby),
    ];
    let url = url_of(&fakes);
    let store = crate::PostgresStore::connect_lazy(&url).unwrap();
    let error = store.wait_for_primary(Duration::ZERO).await.unwrap_err();
    let message = error.to_string();
    assert!(message.starts_with("no server is read-write"), "{message}");
    assert!(message.contains(&format!("{} refused the connection", fakes[0].address())));
    assert!(message.contains(&format!("{}: a standby", fakes[2].address())));
    fakes[2].set(Primary);
    store
        .wait_for_primary(Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(store.pool().connect_options().get_port(), fakes[2].port());
    // Connecting eagerly does the same.
    assert!(crate::PostgresStore::connect(&url).await.is_ok());
}

/// A PostgreSQL URL naming `fakes` in order, as a store's configuration would.
fn url_of(fakes: &[FakeServer]) -> String {
    let hosts: Vec<String> = fakes.iter().map(FakeServer::address).collect();
    format!("postgres://books@{}/books", hosts.join(","))
}
