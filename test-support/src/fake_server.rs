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

/// PostgreSQL's protocol 3.0, as much as a login and a simple query need.
mod postgres {
    use super::*;

    /// `SSLRequest`'s code.
    const SSL_REQUEST: u32 = 80_877_103;

    pub(super) fn serve(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
        // The startup packet, after an SSLRequest declined.
        loop {
            let length = read_u32(stream)? as usize;
            let mut body = vec![0; length.saturating_sub(4)];
            stream.read_exact(&mut body)?;
            if body.len() >= 4 && u32::from_be_bytes(body[..4].try_into().unwrap()) == SSL_REQUEST {
                stream.write_all(b"N")?;
                continue;
            }
            break;
        }
        if answer == Answer::BadPassword {
            let fields = [
                (b'S', "FATAL"),
                (b'V', "FATAL"),
                (b'C', "28P01"),
                (b'M', "password authentication failed for user \"books\""),
            ];
            let mut body = Vec::new();
            for (kind, text) in fields {
                body.push(kind);
                body.extend_from_slice(text.as_bytes());
                body.push(0);
            }
            body.push(0);
            return send(stream, b'E', &body);
        }
        send(stream, b'R', &0u32.to_be_bytes())?;
        send(stream, b'S', b"server_version\x0015.0\x00")?;
        send(stream, b'K', &[0, 0, 0, 1, 0, 0, 0, 2])?;
        send(stream, b'Z', b"I")?;
        loop {
            let mut kind = [0];
            stream.read_exact(&mut kind)?;
            let length = read_u32(stream)? as usize;
            let mut body = vec![0; length.saturating_sub(4)];
            stream.read_exact(&mut body)?;
            match kind[0] {
                b'X' => return Ok(()),
                b'Q' if answer == Answer::CloseMidProbe => {
                    return stream.shutdown(Shutdown::Both);
                }
                b'Q' => {
                    let row = role_row(answer, Protocol::Postgres);
                    let mut description = 2u16.to_be_bytes().to_vec();
                    for name in ["pg_is_in_recovery", "read_only"] {
                        description.extend_from_slice(name.as_bytes());
                        description.push(0);
                        description.extend_from_slice(&0u32.to_be_bytes()); // table
                        description.extend_from_slice(&0u16.to_be_bytes()); // column
                        description.extend_from_slice(&16u32.to_be_bytes()); // bool
                        description.extend_from_slice(&1i16.to_be_bytes()); // size
                        description.extend_from_slice(&(-1i32).to_be_bytes()); // modifier
                        description.extend_from_slice(&0u16.to_be_bytes()); // text
                    }
                    send(stream, b'T', &description)?;
                    let mut data = 2u16.to_be_bytes().to_vec();
                    for value in row {
                        data.extend_from_slice(&(value.len() as u32).to_be_bytes());
                        data.extend_from_slice(value.as_bytes());
                    }
                    send(stream, b'D', &data)?;
                    send(stream, b'C', b"SELECT 1\x00")?;
                    send(stream, b'Z', b"I")?;
                }
                // Anything else (a sync, a flush): ready again.
                _ => send(stream, b'Z', b"I")?,
            }
        }
    }

    fn read_u32(stream: &mut TcpStream) -> std::io::Result<u32> {
        let mut bytes = [0; 4];
        stream.read_exact(&mut bytes)?;
        Ok(u32::from_be_bytes(bytes))
    }

    fn send(stream: &mut TcpStream, kind: u8, body: &[u8]) -> std::io::Result<()> {
        let mut message = vec![kind];
        message.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        message.extend_from_slice(body);
        stream.write_all(&message)
    }
}

/// MariaDB's client/server protocol, as much as a login and a text query need.
mod mysql {
    use super::*;

    /// CLIENT_LONG_PASSWORD (MySQL's, so no MariaDB extended capabilities),
    /// CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION, PLUGIN_AUTH.
    const CAPABILITIES: u32 = 0x1 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x8_0000;

    pub(super) fn serve(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
        let mut greeting = vec![10];
        greeting.extend_from_slice(b"10.11.0-fake\x00");
        greeting.extend_from_slice(&7u32.to_le_bytes()); // connection id
        greeting.extend_from_slice(b"abcdefgh\x00"); // nonce, part 1
        greeting.extend_from_slice(&(CAPABILITIES as u16).to_le_bytes());
        greeting.push(45); // utf8mb4_general_ci
        greeting.extend_from_slice(&2u16.to_le_bytes()); // autocommit
        greeting.extend_from_slice(&((CAPABILITIES >> 16) as u16).to_le_bytes());
        greeting.push(21);
        greeting.extend_from_slice(&[0; 10]);
        greeting.extend_from_slice(b"ijklmnopqrst\x00"); // nonce, part 2
        greeting.extend_from_slice(b"mysql_native_password\x00");
        send(stream, 0, &greeting)?;
        let (sequence, _) = receive(stream)?;
        if answer == Answer::BadPassword {
            let mut error = vec![0xff];
            error.extend_from_slice(&1045u16.to_le_bytes());
            error.extend_from_slice(b"#28000Access denied for user 'books'@'localhost'");
            return send(stream, sequence + 1, &error);
        }
        send(stream, sequence + 1, &ok())?;
        loop {
            let (_, command) = receive(stream)?;
            match command.first() {
                Some(0x01) | None => return Ok(()), // COM_QUIT
                Some(0x03) => {
                    let query = String::from_utf8_lossy(&command[1..]).to_lowercase();
                    if !query.starts_with("select") && !query.starts_with("set statement") {
                        send(stream, 1, &ok())?; // the session's SET
                        continue;
                    }
                    if answer == Answer::CloseMidProbe {
                        return stream.shutdown(Shutdown::Both);
                    }
                    result_set(stream, role_row(answer, Protocol::MySql))?;
                }
                Some(_) => send(stream, 1, &ok())?,
            }
        }
    }

    /// Two `BIGINT` columns and one row, with EOF packets (no `DEPRECATE_EOF`).
    fn result_set(stream: &mut TcpStream, row: [&str; 2]) -> std::io::Result<()> {
        let mut sequence = 1;
        let mut next = |stream: &mut TcpStream, body: &[u8]| {
            let sent = send(stream, sequence, body);
            sequence = sequence.wrapping_add(1);
            sent
        };
        next(stream, &[2])?;
        for name in ["read_only", "writable"] {
            let mut column = Vec::new();
            for text in ["def", "", "", "", name, ""] {
                column.push(text.len() as u8);
                column.extend_from_slice(text.as_bytes());
            }
            column.push(0x0c);
            column.extend_from_slice(&63u16.to_le_bytes()); // binary
            column.extend_from_slice(&21u32.to_le_bytes()); // length
            column.push(0x08); // LONGLONG
            column.extend_from_slice(&0u16.to_le_bytes()); // flags
            column.push(0); // decimals
            column.extend_from_slice(&[0, 0]);
            next(stream, &column)?;
        }
        next(stream, &eof())?;
        let mut values = Vec::new();
        for value in row {
            values.push(value.len() as u8);
            values.extend_from_slice(value.as_bytes());
        }
        next(stream, &values)?;
        next(stream, &eof())
    }

    fn ok() -> Vec<u8> {
        vec![0x00, 0, 0, 2, 0, 0, 0]
    }

    fn eof() -> Vec<u8> {
        vec![0xfe, 0, 0, 2, 0]
    }

    fn receive(stream: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
        let mut header = [0; 4];
        stream.read_exact(&mut header)?;
        let length = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let mut body = vec![0; length];
        stream.read_exact(&mut body)?;
        Ok((header[3], body))
    }

    fn send(stream: &mut TcpStream, sequence: u8, body: &[u8]) -> std::io::Result<()> {
        let length = (body.len() as u32).to_le_bytes();
        let mut packet = vec![length[0], length[1], length[2], sequence];
        packet.extend_from_slice(body);
        stream.write_all(&packet)
    }
}
