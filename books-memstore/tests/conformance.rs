//! The memory store against the shared storage contract, every tier.

use books_memstore::MemStore;

async fn fresh() -> MemStore {
    MemStore::new()
}

books_core::store_conformance_suite! {
    setup: fresh,
    tiers: [versions, version_tally, conditional_writes, idempotent_creates, list_queries],
    // Nothing but the store can write its data: it lives in this process's memory.
    outside_writes: none,
}
