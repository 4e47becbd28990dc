//! Push lag: how long after a write is acknowledged a listening PostgreSQL store knows a
//! version at least as new (`PostgresStore::listening` in push mode), idle and while 16
//! other writers create books as fast as they can.
//! `cargo run --release --example push_lag [-- WRITES]` (PostgreSQL from
//! BOOKS_LOAD_POSTGRES_URL, default the local `test` database; a schema of its own).
//!
//! Each sample: one create through a second store, then its version read after the
//! acknowledgement (so at least the write's own; with other writers, possibly newer: an
//! upper bound), then the time until the listener knows it, counted from the
//! acknowledgement.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use books_core::store::{AuthorStore, BookInput, BookStore, Versions};
use books_sqlx::PostgresStore;
use books_sqlx::sqlx::AssertSqlSafe;

const SCHEMA: &str = "books_push_lag";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("BOOKS_LOAD_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let writes: usize = std::env::args().nth(1).map_or(Ok(1000), |n| n.parse())?;
    let writer = PostgresStore::connect(&url).await?.in_schema(SCHEMA)?;
    books_sqlx::sqlx::query(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"
    )))
    .execute(writer.pool())
    .await?;
    writer.migrate().await?;
    writer.set_push(true).await?;
    let listener = PostgresStore::connect(&url)
        .await?
        .in_schema(SCHEMA)?
        .listening();
    let author = writer.add_author(Some("Lag")).await?;
    let book = BookInput {
        title: "Lag".to_owned(),
        author_id: author,
        year: 2020,
    };
    while listener.known_version().is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    println!(
        "{writes} writes each; lag from the write's acknowledgement until the listener knows it.\n"
    );
    println!("| load | p50 | p99 | max | background creates/s |");
    println!("|---|---|---|---|---|");
    for others in [0, 16] {
        let stop = Arc::new(AtomicBool::new(false));
        let mut background = Vec::new();
        for _ in 0..others {
            let (store, book, stop) = (writer.clone(), book.clone(), stop.clone());
            background.push(tokio::spawn(async move {
                let mut done = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    store
                        .create(&book, chrono::Utc::now())
                        .await
                        .expect("create");
                    done += 1;
                }
                done
            }));
        }
        let started = Instant::now();
        let mut lags = Vec::with_capacity(writes);
        for _ in 0..writes {
            writer.create(&book, chrono::Utc::now()).await?;
            let acknowledged = Instant::now();
            let version = writer.version().await?;
            while listener
                .known_version()
                .is_none_or(|known| known.count < version.count)
            {
                tokio::task::yield_now().await;
            }
            lags.push(acknowledged.elapsed());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let mut created = 0;
        for task in background {
            created += task.await?;
        }
        lags.sort();
        let at = |q: f64| lags[((lags.len() - 1) as f64 * q) as usize];
        println!(
            "| {} | {:.2?} | {:.2?} | {:.2?} | {:.0} |",
            if others == 0 {
                "idle".to_owned()
            } else {
                format!("{others} writers")
            },
            at(0.5),
            at(0.99),
            at(1.0),
            created as f64 / started.elapsed().as_secs_f64()
        );
    }
    writer.set_push(false).await?;
    books_sqlx::sqlx::query(AssertSqlSafe(format!("DROP SCHEMA {SCHEMA} CASCADE")))
        .execute(writer.pool())
        .await?;
    Ok(())
}
