//! The idempotent creates tier: [`IdempotentCreates`]' rules.

use chrono::{DateTime, Utc};

use super::vanishing::{Keyed, author_vanishing_before};
use super::*;
use crate::store::{
    BookRecord, IdempotencyKey, IdempotentCreates, KeyedCreate, StoreError, StoredAnswer,
};

fn keyed<S: TestStore + IdempotentCreates>(store: &Fixture<S>) -> &S {
    store
}

fn answer_for(book: &BookRecord) -> StoredAnswer {
    StoredAnswer {
        status: 201,
        content_type: "application/json".into(),
        location: format!("http://books.test/api/books/{}", book.id),
        etag: format!("\"{}\"", book.id),
        body: format!("{{\"id\":{},\"title\":\"{}\"}}", book.id, book.title).into_bytes(),
    }
}

fn key(name: &str, fingerprint: u8, expires_at: DateTime<Utc>) -> IdempotencyKey {
    IdempotencyKey {
        key: name.to_owned(),
        fingerprint: vec![fingerprint; 32],
        expires_at,
        answer: std::sync::Arc::new(answer_for),
    }
}

/// A keyed create keeps the key's record with the book; the key is taken until its
/// record expires, then a create replaces it; expired records are forgotten in batches.
pub async fn keyed_creates_keep_their_record_with_the_book(
    store: Fixture<impl TestStore + IdempotentCreates>,
) {
    let author = author(&store, "Ann").await;
    let first = key("order-7", 1, at(10));
    let created = keyed(&store)
        .create_keyed(&input("Kept", author, 2001), at(1), &first)
        .await;
    let KeyedCreate::Created(book) = created.unwrap() else {
        panic!("created");
    };
    assert_eq!(store.get(book.id).await.unwrap(), Some(book.clone()));
    let record = keyed(&store)
        .idempotency_record("order-7", at(2))
        .await
        .unwrap();
    let record = record.expect("kept");
    assert_eq!(record.fingerprint, vec![1; 32]);
    assert_eq!(record.answer, answer_for(&book));
    assert_eq!(
        keyed(&store)
            .idempotency_record("other", at(2))
            .await
            .unwrap(),
        None
    );

    let again = key("order-7", 2, at(10));
    let taken = keyed(&store)
        .create_keyed(&input("Twice", author, 2001), at(2), &again)
        .await;
    assert_eq!(taken.unwrap(), KeyedCreate::Taken);
    assert_eq!(
        store.list(&query(0, 10)).await.unwrap().total,
        1,
        "nothing written"
    );
    let missing_author = key("order-8", 1, at(10));
    let orphan = input("X", author + 100, 2001);
    let failed = keyed(&store)
        .create_keyed(&orphan, at(2), &missing_author)
        .await;
    assert!(matches!(failed, Err(StoreError::AuthorNotFound(_))));
    assert_eq!(
        keyed(&store)
            .idempotency_record("order-8", at(2))
            .await
            .unwrap(),
        None,
        "unused"
    );

    assert_eq!(
        keyed(&store)
            .idempotency_record("order-7", at(10))
            .await
            .unwrap(),
        None,
        "expired"
    );
    let later = key("order-7", 3, at(20));
    let replaced = keyed(&store)
        .create_keyed(&input("Later", author, 2001), at(11), &later)
        .await;
    assert!(matches!(replaced.unwrap(), KeyedCreate::Created(_)));
    let record = keyed(&store)
        .idempotency_record("order-7", at(11))
        .await
        .unwrap();
    assert_eq!(record.unwrap().fingerprint, vec![3; 32]);

    for n in 0..5 {
        let old = key(&format!("old-{n}"), 1, at(3));
        let book = input("Old", author, 2001);
        keyed(&store)
            .create_keyed(&book, at(2), &old)
            .await
            .unwrap();
    }
    assert_eq!(
        keyed(&store).forget_expired_keys(at(12), 3).await.unwrap(),
        3,
        "a batch"
    );
    assert_eq!(
        keyed(&store).forget_expired_keys(at(12), 3).await.unwrap(),
        2
    );
    assert_eq!(
        keyed(&store).forget_expired_keys(at(12), 3).await.unwrap(),
        0
    );
    assert!(
        keyed(&store)
            .idempotency_record("order-7", at(12))
            .await
            .unwrap()
            .is_some(),
        "unexpired records stay"
    );
}

/// Keyed creates sent at once (which a store may write together): each distinct key
/// gets its book; of several with one key, exactly one is written.
pub async fn keyed_creates_sent_together_each_keep_their_key(
    store: Fixture<impl TestStore + IdempotentCreates>,
) {
    let author = author(&store, "Ann").await;
    let names: Vec<String> = (0..12).map(|n| format!("key-{}", n % 9)).collect();
    let creates = names.iter().map(|name| {
        let store = store.clone();
        let key = key(name, 1, at(10));
        async move {
            keyed(&store)
                .create_keyed(&input(name, author, 2001), at(1), &key)
                .await
                .unwrap()
        }
    });
    let outcomes = futures_util::future::join_all(creates).await;
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, KeyedCreate::Created(_)))
        .count();
    assert_eq!(created, 9, "{outcomes:?}");
    assert_eq!(store.list(&query(0, 20)).await.unwrap().total, 9);
    for n in 0..9 {
        let record = keyed(&store)
            .idempotency_record(&format!("key-{n}"), at(2))
            .await
            .unwrap();
        let body = String::from_utf8(record.expect("kept").answer.body).unwrap();
        assert!(body.contains(&format!("key-{n}")), "its own book: {body}");
    }
}

/// An author deleted between validation and a keyed create: 422 on `author_id`, nothing
/// stored, and nothing kept for the key.
pub async fn author_vanishing_before_a_keyed_create_is_422(
    store: Fixture<impl TestStore + IdempotentCreates>,
) {
    let key = Some(("idempotency-key", "vanishing"));
    author_vanishing_before::<_, Keyed>(&store, &[("POST", key)]).await;
    let kept = keyed(&store)
        .idempotency_record("vanishing", at(1))
        .await
        .unwrap();
    assert_eq!(kept, None, "a failed create leaves its key unused");
}
