//! A store wrapped generically ([`Hooked`]) keeps every tier of the store inside: the
//! storage contract and the HTTP contract over a hooked memory store, and the hook sees
//! each tier's calls.

use books_core::Config;
use books_core::store::{Hooked, StoreCall, Tiers};
use books_core::testing::{CountingHook, Harness, InProcess};
use books_memstore::MemStore;
use bytes::Bytes;
use http::{Request, StatusCode};

type Counted = Hooked<MemStore, CountingHook>;

async fn fresh() -> Counted {
    Hooked::new(MemStore::new(), CountingHook::default())
}

mod storage {
    use super::*;

    books_core::store_conformance_suite! {
        setup: fresh,
        tiers: [versions, known_version, version_tally, conditional_writes, idempotent_creates, list_queries],
    }
}

mod http_contract {
    use super::*;

    async fn in_process(config: Config) -> InProcess<Counted> {
        InProcess::new(fresh().await, config)
    }

    books_core::http_contract_suite!(in_process);
}

fn request(method: &str, uri: &str, headers: &[(&str, &str)], body: &str) -> Request<Bytes> {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Bytes::from(body.to_owned())).unwrap()
}

#[tokio::test]
async fn every_tier_of_the_inner_store_is_served_and_hooked() {
    let harness = InProcess::new(fresh().await, Config::default());
    assert_eq!(harness.api().tiers(), Tiers::ALL);
    let author = harness.add_author(Some("Ann")).await;
    let book = format!(r#"{{"title":"Dune","author_id":{author},"year":2021}}"#);
    let json = ("content-type", "application/json");
    let created = harness
        .send(request(
            "POST",
            "/api/books",
            &[json, ("idempotency-key", "k1")],
            &book,
        ))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let read = harness.send(request("GET", "/api/books/1", &[], "")).await;
    let etag = read.headers()["etag"].to_str().unwrap().to_owned();
    let updated = harness
        .send(request(
            "PUT",
            "/api/books/1",
            &[json, ("if-match", &etag)],
            &book,
        ))
        .await;
    assert_eq!(updated.status(), StatusCode::OK);
    let hook = harness.store().hook();
    for call in [StoreCall::CreateKeyed, StoreCall::UpdateIf] {
        assert_eq!(hook.count(call), 1, "{}", call.name());
    }
    assert!(hook.count(StoreCall::Version) + hook.count(StoreCall::GetVersioned) > 0);
}
