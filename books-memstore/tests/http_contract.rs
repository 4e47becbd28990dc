//! The whole HTTP contract through `BooksApi::handle`, in process, over the memory store.

use books_core::Config;
use books_core::testing::InProcess;
use books_memstore::MemStore;

async fn in_process(config: Config) -> InProcess<MemStore> {
    InProcess::new(MemStore::new(), config)
}

books_core::http_contract_suite!(in_process);
