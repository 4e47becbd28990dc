//! The memory store against the shared storage contract.

use books_memstore::MemStore;

async fn fresh() -> MemStore {
    MemStore::new()
}

books_core::store_conformance_suite!(fresh);
