//! A fake database server that speaks just enough of PostgreSQL's and MariaDB's wire
//! protocols for a client to connect and ask one query: the role probe a store sends
//! while looking for its primary. It answers every query with the row its [`Answer`]
//! says (PostgreSQL: `pg_is_in_recovery()` and `transaction_read_only`; MariaDB:
//! `@@global.read_only` and whether the node takes writes), or misbehaves as a
//! real server or network can: refuse, accept and never answer, close mid-probe, refuse
//! the login. The answer can change while it runs (a role flip), and it counts the
//! connections it accepted, so a test can tell how many searches asked it.
//!
//! Host choice is tested against it in milliseconds, one case per state, where a real
//! cluster takes seconds to change state.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socket2::{Domain, Socket, Type};

mod mysql;
mod postgres;

/// The protocol a fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// PostgreSQL's (protocol 3.0; `SSLRequest` declined, no password asked).
    Postgres,
    /// MariaDB's (protocol 10, `mysql_native_password`, no TLS).
    MySql,
}

/// How a fake answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A primary: takes writes, not in recovery.
    Primary,
    /// A standby (PostgreSQL in recovery; a MariaDB replica with `read_only`).
    Standby,
    /// Not in recovery, but read-only (PostgreSQL `default_transaction_read_only`).
    ReadOnly,
    /// A Galera node not `Synced` or outside the primary component: not read-only, and
    /// takes no writes (MariaDB's answer; PostgreSQL's is as [`Answer::ReadOnly`]).
    NotSynced,
    /// Connection refused: nothing listens.
    Refuse,
    /// Accepts, and never sends a byte (a black hole: a host cut off by a firewall
    /// that drops, or a process stopped).
    Silent,
    /// Completes the login, then closes the connection when the query arrives.
    CloseMidProbe,
    /// Refuses the login (PostgreSQL 28P01, MariaDB 1045).
    BadPassword,
}

/// A fake server on a loopback port of its own, until dropped.
pub struct FakeServer {
    port: u16,
    /// A socket bound to the port and never listening: while the fake refuses, the
    /// kernel hands the port to no other bind to port 0 (another fake's, another
    /// test's), so a refused host stays refused and no two fakes share a port.
    _reserved: Socket,
    protocol: Protocol,
    shared: Arc<Shared>,
    /// The listener while it listens, and its accept thread with its stop flag.
    listener: Mutex<Option<Listening>>,
}

/// An open port: the listener, and the thread accepting on it until told to stop.
type Listening = (TcpListener, Arc<AtomicBool>, std::thread::JoinHandle<()>);

/// What the fake's threads share with it.
struct Shared {
    answer: Mutex<Answer>,
    accepted: AtomicUsize,
    /// Connections held open by [`Answer::Silent`], closed when the fake is dropped.
    held: Mutex<Vec<TcpStream>>,
}

impl FakeServer {
    /// A fake speaking `protocol`, answering `answer` until told otherwise.
    pub fn start(protocol: Protocol, answer: Answer) -> Self {
        let reserved = shared_socket();
        reserved
            .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .expect("a loopback port");
        let port = reserved
            .local_addr()
            .ok()
            .and_then(|address| address.as_socket())
            .expect("its address")
            .port();
        let fake = Self {
            port,
            _reserved: reserved,
            protocol,
            shared: Arc::new(Shared {
                answer: Mutex::new(answer),
                accepted: AtomicUsize::new(0),
                held: Mutex::new(Vec::new()),
            }),
            listener: Mutex::new(None),
        };
        fake.set(answer);
        fake
    }

    /// The port it listens on (or listened on, while it refuses).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many connections it accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Answers `answer` from the next connection on ([`Answer::Refuse`] closes the
    /// port; any other opens it again).
    pub fn set(&self, answer: Answer) {
        *self.shared.answer.lock().unwrap() = answer;
        let mut listening = self.listener.lock().unwrap();
        match (answer, listening.take()) {
            (Answer::Refuse, Some((listener, stop, accepting))) => {
                // Closing the listener refuses connections once the accept thread,
                // woken by a connection of ours, has closed its copy too.
                stop.store(true, Ordering::SeqCst);
                let _ = TcpStream::connect(("127.0.0.1", self.port));
                let _ = accepting.join();
                drop(listener);
            }
            (Answer::Refuse, None) => {}
            (_, Some(open)) => *listening = Some(open),
            (_, None) => {
                // Beside the reservation: Linux lets sockets that both reuse the
                // address share a port while at most one of them listens.
                let socket = shared_socket();
                socket
                    .bind(&SocketAddr::from(([127, 0, 0, 1], self.port)).into())
                    .expect("the fake's port beside its reservation");
                socket.listen(128).expect("listening on the fake's port");
                *listening = Some(self.listen(socket.into()));
            }
        }
    }

    /// Accepts on `listener` in a thread of its own until the flag returned says stop.
    fn listen(&self, listener: TcpListener) -> Listening {
        let accepting = listener.try_clone().expect("the listener");
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, protocol, stopped) = (self.shared.clone(), self.protocol, stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in accepting.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, protocol, &shared));
            }
        });
        (listener, stop, thread)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.set(Answer::Refuse);
        for stream in self.shared.held.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// A TCP socket that shares its address with the fake's others (`SO_REUSEADDR`).
fn shared_socket() -> Socket {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(socket2::Protocol::TCP))
        .expect("a TCP socket");
    socket.set_reuse_address(true).expect("SO_REUSEADDR");
    socket
}

/// One connection: the login, then each query answered as the fake's answer says.
fn serve(mut stream: TcpStream, protocol: Protocol, shared: &Shared) {
    let answer = *shared.answer.lock().unwrap();
    if answer == Answer::Silent {
        if let Ok(held) = stream.try_clone() {
            shared.held.lock().unwrap().push(held);
        }
        return;
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = stream.set_nodelay(true);
    let _ = match protocol {
        Protocol::Postgres => postgres::serve(&mut stream, answer),
        Protocol::MySql => mysql::serve(&mut stream, answer),
    };
}

/// The role row an answer gives: (in recovery or read-only, writable) as text.
fn role_row(answer: Answer, protocol: Protocol) -> [&'static str; 2] {
    match (protocol, answer) {
        (Protocol::Postgres, Answer::Standby) => ["t", "t"],
        (Protocol::Postgres, Answer::ReadOnly | Answer::NotSynced) => ["f", "t"],
        (Protocol::Postgres, _) => ["f", "f"],
        // MariaDB: `@@global.read_only`, and whether it takes writes.
        (Protocol::MySql, Answer::Standby | Answer::ReadOnly) => ["1", "0"],
        (Protocol::MySql, Answer::NotSynced) => ["0", "0"],
        (Protocol::MySql, _) => ["0", "1"],
    }
}
