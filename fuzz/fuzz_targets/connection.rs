//! Raw bytes through the server's connection loop (`books_api::serve`: hyper's HTTP/1.1
//! and HTTP/2, the core) over loopback. A panic anywhere in the server aborts the
//! process (libFuzzer's panic hook), so none is lost in a connection task.
#![no_main]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use books_api::Limits;
use books_core::Config;
use books_fuzz::demo_api;
use libfuzzer_sys::fuzz_target;

/// The server, started once on an ephemeral port in a thread of its own.
fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let api = demo_api(Config::default());
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                sender.send(listener.local_addr().unwrap()).unwrap();
                let limits = Limits {
                    header_timeout: Duration::from_secs(2),
                    request_timeout: Duration::from_secs(2),
                    shutdown_grace: Duration::from_secs(1),
                    ..Limits::default()
                };
                books_api::serve(listener, api, limits, std::future::pending())
                    .await
                    .unwrap();
            });
        });
        receiver.recv().expect("server address")
    })
}

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fuzz_target!(|data: &[u8]| {
    let Ok(mut stream) = TcpStream::connect(server()) else {
        return;
    };
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if stream.write_all(data).is_err() {
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    // HTTP/2's preface (or the start of it) gets HTTP/2 frames, binary: only a panic
    // counts there.
    let http2 = data.starts_with(PREFACE) || PREFACE.starts_with(data);
    if !answer.is_empty() && !http2 {
        assert!(answer.starts_with(b"HTTP/1."), "{:?}", String::from_utf8_lossy(&answer));
        assert!(
            !answer.starts_with(b"HTTP/1.1 5") && !answer.starts_with(b"HTTP/1.0 5"),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );
    }
});
