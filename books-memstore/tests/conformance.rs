//! The memory store against the shared storage contract, every tier.

use books_memstore::MemStore;

async fn fresh() -> MemStore {
    MemStore::new()
}

books_core::store_conformance_suite! {
    setup: fresh,
    // No outside writes: nothing but the store can write its data (it lives in this
    // process's memory), so the cases that need them are not generated.
    tiers: [versions, known_version, version_tally, conditional_writes, idempotent_creates, list_queries],
}
