//! The server's Prometheus exporter: the recorder every metric goes to, and the pool
//! gauges it refreshes.

use std::sync::Arc;
use std::time::Duration;

use books_hyper::RenderMetrics;
use books_sqlx::PoolState;
use metrics::gauge;
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::Error;

/// Histogram buckets (seconds) for request and store latencies: 100 µs to 10 s.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0,
];

/// Installs the process's Prometheus recorder and starts a task that refreshes the pool
/// gauges (`books_db_pool_connections{pool, state}`, `state` `idle` or `in_use`, and
/// `books_db_pool_max_connections{pool}`) from `pools` and the exporter's histograms
/// every second. Serve what it returns at `/metrics` through
/// [`Operations`](books_hyper::Operations), or on an address of its own with
/// [`serve_metrics`](books_hyper::serve_metrics).
pub fn install_metrics(
    pools: impl Fn() -> Vec<PoolState> + Send + 'static,
) -> Result<RenderMetrics, Error> {
    let handle = PrometheusBuilder::new()
        .set_buckets(&BUCKETS)?
        .install_recorder()?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            for pool in pools() {
                record_pool(pool);
            }
            upkeep.run_upkeep();
        }
    });
    Ok(Arc::new(move || handle.render()))
}

fn record_pool(pool: PoolState) {
    let (name, in_use) = (pool.name, pool.size.saturating_sub(pool.idle));
    gauge!("books_db_pool_connections", "pool" => name.clone(), "state" => "idle").set(pool.idle);
    gauge!("books_db_pool_connections", "pool" => name.clone(), "state" => "in_use").set(in_use);
    gauge!("books_db_pool_max_connections", "pool" => name).set(pool.max);
}
