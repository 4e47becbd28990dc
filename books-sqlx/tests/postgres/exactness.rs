//! Every writer is seen: another store (another process), the host's own SQL, deep
//! pages after a host's bulk load.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_sees_every_writer() {
    if !available().await {
        return;
    }
    let (ours, theirs, schema, host) = two_stores_and_a_host().await;
    common::version_sees_every_writer(ours, theirs, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_see_every_writer() {
    if !available().await {
        return;
    }
    let (ours, theirs, schema, host) = two_stores_and_a_host().await;
    cache_is_exact_across_writers(ours, theirs, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_pages_cross_groups() {
    if !available().await {
        return;
    }
    let (ours, _, schema, host) = two_stores_and_a_host().await;
    common::deep_pages_cross_groups(ours, async |sql, author| {
        host_sql(&host, &schema, sql, author).await
    })
    .await;
}
