//! What the tests that run the server binary share.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// Waits for a server started with its stdout piped to print "listening on
/// http://ADDR/…" and returns ADDR; the rest of stdout keeps being read, since a closed
/// pipe would fail the server's writes.
pub async fn listening(child: &mut Child) -> SocketAddr {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(stdout).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                return rest.split('/').next().map(str::to_owned);
            }
        }
        None
    })
    .await
    .expect("the server starts")
    .expect("a line: listening on http://ADDR/…");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    addr.parse().expect("an address")
}
