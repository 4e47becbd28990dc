//! A cluster held for the failover benchmark (`scripts/load.py --failover`), driven over
//! stdin and stdout.
//!
//! ```text
//! cargo run --release -p books-test-support --example cluster -- pg|galera
//! ```
//!
//! Starts a pg_auto_failover formation (a monitor, a primary, a standby) or a three-node
//! Galera cluster with a database `books`, prints one `url URL` line per way to name it
//! (PostgreSQL: the multi-host URL, then the first node's own; Galera: the nodes in the
//! orders 0,1,2 and 1,2,0, then node 0's own), then `ready`, and answers each line read:
//!
//! - `switchover` (PostgreSQL: `pg_autoctl perform switchover`) or `kill` (the primary, or
//!   Galera's node 0, `SIGKILL`): prints `accepting T` once a write commits on another
//!   node (T: Unix time in seconds), polled every 20 ms;
//! - `rows`: each book on a node that takes writes as `id<TAB>title`, then `end`.
//!
//! The cluster is removed at end of input.

use std::io::BufRead;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use books_test_support::{Galera, PgAutoFailover, started};

/// What the benchmark asks of a cluster.
trait Held {
    /// Runs `event`; the ports of the nodes that may take writes after it.
    fn event(&mut self, event: &str) -> Vec<u16>;
    /// Whether a write commits on the node at `port` (blocking until it does or fails).
    fn writes(&self, port: u16) -> bool;
    /// The books, `id<TAB>title` per line, from a node that takes writes.
    fn rows(&self) -> String;
}

/// The formation, and the thread running a switchover (joined before the formation is
/// removed).
struct Formation {
    formation: Arc<PgAutoFailover>,
    switching: Option<JoinHandle<Option<u16>>>,
}

impl Drop for Formation {
    fn drop(&mut self) {
        if let Some(switching) = self.switching.take() {
            let _ = switching.join();
        }
    }
}

impl Held for Formation {
    fn event(&mut self, event: &str) -> Vec<u16> {
        let old = self.formation.primary_port().expect("a primary");
        match event {
            "switchover" => {
                let formation = self.formation.clone();
                self.switching = Some(std::thread::spawn(move || formation.switchover()));
            }
            "kill" => {
                let formation = Arc::get_mut(&mut self.formation).expect("one event");
                assert!(formation.kill_primary().is_some(), "the primary killed");
            }
            other => panic!("unknown event {other}"),
        }
        self.formation
            .node_ports()
            .into_iter()
            .filter(|&p| p != old)
            .collect()
    }

    fn writes(&self, port: u16) -> bool {
        // A real table: a read-only session may still create temporary ones.
        let write = "CREATE TABLE IF NOT EXISTS failover_probe (n int); \
                     INSERT INTO failover_probe VALUES (1)";
        self.formation.sql(port, "books", write).is_some()
    }

    fn rows(&self) -> String {
        let port = self.formation.primary_port().expect("a primary");
        let rows = "SELECT id || E'\\t' || title FROM books ORDER BY id";
        self.formation.sql(port, "books", rows).unwrap_or_default()
    }
}

impl Held for Galera {
    fn event(&mut self, event: &str) -> Vec<u16> {
        assert_eq!(event, "kill", "Galera's event is kill");
        assert!(self.kill(0), "node 0 killed");
        self.ports()[1..].to_vec()
    }

    fn writes(&self, port: u16) -> bool {
        let index = self
            .ports()
            .iter()
            .position(|&p| p == port)
            .expect("a node");
        let write = "CREATE TABLE IF NOT EXISTS books.probe (n INT PRIMARY KEY); \
                     REPLACE INTO books.probe VALUES (1)";
        self.sql(index, write).is_some()
    }

    fn rows(&self) -> String {
        let rows = "SELECT id, title FROM books.books ORDER BY id";
        self.sql(1, rows).unwrap_or_default()
    }
}

fn main() {
    let kind = std::env::args().nth(1).unwrap_or_default();
    let mut held: Box<dyn Held> = match kind.as_str() {
        "pg" => {
            let formation = started(PgAutoFailover::start(), "a pg_auto_failover formation");
            assert!(formation.create_database("books"), "database books");
            println!("url {}", formation.url("books"));
            let first = formation.node_ports()[0];
            println!("url {}", PgAutoFailover::node_url(first, "books"));
            Box::new(Formation {
                formation: Arc::new(formation),
                switching: None,
            })
        }
        "galera" => {
            let galera = started(Galera::start(3), "a three-node Galera cluster");
            assert!(
                galera.sql(0, "CREATE DATABASE books").is_some(),
                "database books"
            );
            let ports = galera.ports();
            for order in [[0, 1, 2], [1, 2, 0]] {
                let hosts: Vec<String> = order
                    .iter()
                    .map(|&i| format!("127.0.0.1:{}", ports[i]))
                    .collect();
                println!("url mysql://root@{}/books", hosts.join(","));
            }
            for node in [0, 1] {
                println!("url {}", galera.node_url(node, "books"));
            }
            Box::new(galera)
        }
        other => panic!("usage: cluster pg|galera (not {other:?})"),
    };
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("a command");
        match line.trim() {
            "rows" => println!("{}\nend", held.rows()),
            event => {
                let candidates = held.event(event);
                let deadline = Instant::now() + Duration::from_secs(120);
                'probing: while Instant::now() < deadline {
                    for &port in &candidates {
                        if held.writes(port) {
                            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                            println!("accepting {:.3}", now.as_secs_f64());
                            break 'probing;
                        }
                    }
                    sleep(Duration::from_millis(20));
                }
            }
        }
    }
}
