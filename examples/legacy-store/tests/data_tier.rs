//! The store with the data tier alone: the data tier of the conformance suite, and the
//! whole HTTP contract through it (no cache; `If-Match` and `Idempotency-Key` get their
//! documented 501).

mod common;

use books_core::Config;
use books_core::testing::InProcess;
use books_example_legacy_store::CatalogueStore;

async fn fresh() -> CatalogueStore {
    CatalogueStore::new(common::host_database("").await)
}

mod conformance {
    use super::*;
    books_core::store_conformance_suite! {
        setup: fresh,
        tiers: [],
        outside_writes: common::host_writes,
    }
}

mod http_contract {
    use super::*;
    async fn in_process(config: Config) -> InProcess<CatalogueStore> {
        InProcess::new(fresh().await, config)
    }
    books_core::http_contract_suite!(in_process);
}
