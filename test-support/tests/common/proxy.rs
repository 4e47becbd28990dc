//! A TCP proxy between a store and the database that can be cut or silenced.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy to the real server on `port` that can be cut (every connection with it)
/// or silenced (connections stay open, nothing gets through: a dead network path).
pub struct Proxy(tokio::task::JoinHandle<()>, Arc<AtomicBool>);

impl Proxy {
    pub async fn start(port: u16, real: String) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let quiet = silent.clone();
        Self(
            tokio::spawn(async move {
                let mut links = tokio::task::JoinSet::new();
                loop {
                    let (client, _) = listener.accept().await.unwrap();
                    let server = TcpStream::connect(&real).await.unwrap();
                    let ((from_client, to_client), (from_server, to_server)) =
                        (client.into_split(), server.into_split());
                    links.spawn(pipe(from_client, to_server, quiet.clone()));
                    links.spawn(pipe(from_server, to_client, quiet.clone()));
                }
            }),
            silent,
        )
    }

    /// Whether bytes stop getting through (they are read and dropped).
    pub fn silence(&self, silent: bool) {
        self.1.store(silent, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until either side closes; while `silent`, drops what it reads.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(read @ 1..) = from.read(&mut buffer).await {
        if !silent.load(Ordering::Relaxed) && to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

impl Drop for Proxy {
    /// Cuts every connection: dropping the task drops its `JoinSet`, which aborts them.
    fn drop(&mut self) {
        self.0.abort();
    }
}
