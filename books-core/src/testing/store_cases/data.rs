//! The data tier: every store's cases.

use super::vanishing::{Plain, author_vanishing_before};
use super::*;
use crate::api::BooksApi;
use crate::config::Config;
use crate::store::{StoreError, Tiers};

/// The store names exactly the tiers the suite runs for it (so a tier it claims is
/// tested, and one the suite tests is one the API will use).
pub async fn capabilities_are_the_tiers_tested<S: TestStore>(
    store: Fixture<S>,
    tested: Tiers,
    implemented: impl Fn(&S) -> Tiers,
) {
    let declared = std::sync::Arc::new(store.store()).capabilities().tiers();
    assert_eq!(
        declared, tested,
        "the store's capabilities() and the tiers its conformance suite runs must agree"
    );
    let missing = implemented(&store).missing_from(&declared);
    assert!(
        missing.is_empty(),
        "the store implements {} but its capabilities() do not name it",
        missing.join(", ")
    );
}

pub async fn empty_store_lists_nothing(store: Fixture<impl TestStore>) {
    let page = store.list(&query(0, 20)).await.unwrap();
    assert!(page.books.is_empty());
    assert_eq!(page.total, 0);
}

pub async fn create_then_get_round_trips(store: Fixture<impl TestStore>) {
    let author = author(&store, "Frank Herbert").await;
    let created = store
        .create(&input("Dune ✓ \"quoted\" 'x' <&>", author, 2021), at(2))
        .await
        .unwrap();
    assert!(created.id >= 1);
    let book = store.get(created.id).await.unwrap().expect("created book");
    assert_eq!(created, book, "create answers what get reads");
    assert_eq!(book.title, "Dune ✓ \"quoted\" 'x' <&>");
    assert_eq!(book.year, 2021);
    assert_eq!(book.author_id, Some(author));
    assert_eq!(book.author_name.as_deref(), Some("Frank Herbert"));
    assert_eq!(book.created_at, at(2));
    assert_eq!(book.updated_at, at(2));
}

pub async fn get_missing_is_none(store: Fixture<impl TestStore>) {
    assert_eq!(store.get(1).await.unwrap(), None);
    assert_eq!(store.get(i64::MAX).await.unwrap(), None);
    let author = author(&store, "A").await;
    let id = create(&store, "one", author).await;
    assert_eq!(store.get(id + 1).await.unwrap(), None);
}

pub async fn list_orders_by_id_with_page_boundaries(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    let mut ids = Vec::new();
    for n in 0..7 {
        ids.push(create(&store, &format!("book {n}"), author).await);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let page = store.list(&query(0, 3)).await.unwrap();
    assert_eq!(
        page.books.iter().map(|b| b.id).collect::<Vec<_>>(),
        ids[..3]
    );
    assert_eq!(page.total, 7);
    assert_eq!(
        titles(&store, 3, 3).await,
        (vec!["book 3".into(), "book 4".into(), "book 5".into()], 7)
    );
    assert_eq!(titles(&store, 6, 3).await, (vec!["book 6".into()], 7));
    assert_eq!(titles(&store, 0, 100).await.0.len(), 7);
    store.delete(ids[1]).await.unwrap();
    let (rest, total) = titles(&store, 0, 3).await;
    assert_eq!(rest, ["book 0", "book 2", "book 3"]);
    assert_eq!(total, 6);
}

pub async fn list_offset_past_the_end_keeps_total(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    create(&store, "only", author).await;
    let page = store.list(&query(5, 20)).await.unwrap();
    assert!(page.books.is_empty());
    assert_eq!(page.total, 1);
    let far = store.list(&query(i64::MAX as u64, 20)).await.unwrap();
    assert!(far.books.is_empty());
    assert_eq!(far.total, 1);
}

pub async fn list_and_get_join_authors(store: Fixture<impl TestStore>) {
    let named = author(&store, "Ursula K. Le Guin").await;
    let nameless = store.add_author(None).await.unwrap();
    let a = create(&store, "named", named).await;
    let b = create(&store, "nameless", nameless).await;
    let page = store.list(&query(0, 20)).await.unwrap();
    assert_eq!(page.books[0].author_id, Some(named));
    assert_eq!(
        page.books[0].author_name.as_deref(),
        Some("Ursula K. Le Guin")
    );
    assert_eq!(page.books[1].author_id, Some(nameless));
    assert_eq!(page.books[1].author_name, None);
    assert_eq!(store.get(a).await.unwrap().unwrap(), page.books[0]);
    assert_eq!(store.get(b).await.unwrap().unwrap(), page.books[1]);
}

pub async fn removed_author_leaves_book_without_author(store: Fixture<impl TestStore>) {
    let gone = author(&store, "Gone").await;
    let kept = author(&store, "Kept").await;
    let a = create(&store, "orphan", gone).await;
    let b = create(&store, "kept", kept).await;
    assert!(store.remove_author(gone).await.unwrap());
    assert!(!store.remove_author(gone).await.unwrap());
    let orphan = store
        .get(a)
        .await
        .unwrap()
        .expect("book survives its author");
    assert_eq!((orphan.author_id, orphan.author_name), (None, None));
    let page = store.list(&query(0, 20)).await.unwrap();
    assert_eq!(page.total, 2);
    assert_eq!(page.books[0].author_id, None);
    assert_eq!(
        store.get(b).await.unwrap().unwrap().author_name.as_deref(),
        Some("Kept")
    );
}

pub async fn create_with_missing_author_is_author_not_found(store: Fixture<impl TestStore>) {
    let result = store.create(&input("x", 4242, 2001), at(1)).await;
    assert!(
        matches!(result, Err(StoreError::AuthorNotFound(4242))),
        "{result:?}"
    );
    assert_eq!(
        store.list(&query(0, 20)).await.unwrap().total,
        0,
        "nothing stored"
    );
}

pub async fn update_replaces_fields_and_keeps_created_at(store: Fixture<impl TestStore>) {
    let first = author(&store, "First").await;
    let second = author(&store, "Second").await;
    let id = create(&store, "before", first).await;
    let updated = store
        .update(id, &input("after", second, 2010), at(9))
        .await
        .unwrap();
    let book = store.get(id).await.unwrap().unwrap();
    assert_eq!(updated, Some(book.clone()), "update answers what get reads");
    assert_eq!(book.title, "after");
    assert_eq!(book.year, 2010);
    assert_eq!(book.author_id, Some(second));
    assert_eq!(book.author_name.as_deref(), Some("Second"));
    assert_eq!(book.created_at, at(1));
    assert_eq!(book.updated_at, at(9));
}

pub async fn update_of_missing_id_is_none(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    assert_eq!(
        store
            .update(99, &input("x", author, 2001), at(1))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.list(&query(0, 20)).await.unwrap().total,
        0,
        "update never inserts"
    );
}

pub async fn update_with_missing_author_is_author_not_found(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    let id = create(&store, "kept", author).await;
    let result = store.update(id, &input("changed", 4242, 2002), at(5)).await;
    assert!(
        matches!(result, Err(StoreError::AuthorNotFound(4242))),
        "{result:?}"
    );
    let book = store.get(id).await.unwrap().unwrap();
    assert_eq!(
        (book.title.as_str(), book.year),
        ("kept", 2001),
        "nothing written"
    );
}

pub async fn delete_removes_only_that_book(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    let a = create(&store, "a", author).await;
    let b = create(&store, "b", author).await;
    assert!(store.delete(a).await.unwrap());
    assert!(!store.delete(a).await.unwrap());
    assert!(!store.delete(9999).await.unwrap());
    assert_eq!(store.get(a).await.unwrap(), None);
    assert!(store.get(b).await.unwrap().is_some());
    assert_eq!(store.list(&query(0, 20)).await.unwrap().total, 1);
}

pub async fn ids_are_never_reused_after_delete(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    let a = create(&store, "a", author).await;
    let b = create(&store, "b", author).await;
    assert!(store.delete(b).await.unwrap());
    let c = create(&store, "c", author).await;
    assert!(c > b, "id {c} reuses or precedes deleted {b}");
    assert!(store.delete(a).await.unwrap());
    assert!(store.delete(c).await.unwrap());
    let d = create(&store, "d", author).await;
    assert!(d > c, "id {d} after deleting everything must exceed {c}");
}

pub async fn author_exists_matches_authors(store: Fixture<impl TestStore>) {
    let named = author(&store, "A").await;
    let nameless = store.add_author(None).await.unwrap();
    assert_ne!(named, nameless);
    assert!(store.author_exists(named).await.unwrap());
    assert!(store.author_exists(nameless).await.unwrap());
    assert!(!store.author_exists(nameless + 1000).await.unwrap());
    store.remove_author(named).await.unwrap();
    assert!(!store.author_exists(named).await.unwrap());
}

/// An author deleted between validation and a create or an update: 422 on `author_id`,
/// nothing stored.
pub async fn author_vanishing_before_a_write_is_422(store: Fixture<impl TestStore>) {
    author_vanishing_before::<_, Plain>(&store, &[("POST", None), ("PUT", None)]).await;
}

/// The demo data: 45 books, 50 authors, books without an author or with a nameless one;
/// loaded only into an empty store.
pub async fn demo_data_loads_once_into_an_empty_store(store: Fixture<impl TestStore>) {
    assert!(
        crate::demo::load_with_authors(&*store, &store, at(1))
            .await
            .unwrap()
    );
    let page = store.list(&query(0, 100)).await.unwrap();
    assert_eq!(page.total, 45);
    assert!(
        page.books.iter().any(|b| b.author_id.is_none()),
        "a book without author"
    );
    assert!(
        page.books
            .iter()
            .any(|b| b.author_id.is_some() && b.author_name.is_none()),
        "a book with a nameless author"
    );
    let mut authors = 0;
    for id in 1..=200 {
        authors += usize::from(store.author_exists(id).await.unwrap());
    }
    assert_eq!(authors, 50);
    assert!(
        !crate::demo::load_with_authors(&*store, &store, at(2))
            .await
            .unwrap()
    );
    assert_eq!(store.list(&query(0, 1)).await.unwrap().total, 45);
}

pub async fn reachable_store_is_ready(store: Fixture<impl TestStore>) {
    store
        .ready()
        .await
        .expect("an empty, reachable store is ready");
    let id = author(&store, "A").await;
    store.create(&input("T", id, 2020), at(1)).await.unwrap();
    store.ready().await.expect("and stays ready with data");
    let api = BooksApi::new(store.store(), Config::default());
    api.ready()
        .await
        .expect("the API reports the store's readiness");
}

/// A page and its total come from one snapshot: while a writer outside the store adds
/// books beside the reads, every page of the whole list holds as many books as its total
/// says (a page and a total read in two snapshots disagree whenever a write commits
/// between them).
pub async fn pages_and_totals_come_from_one_snapshot(store: Fixture<impl TestStore>) {
    let author = author(&store, "A").await;
    create(&store, "first", author).await;
    one_snapshot_under_outside_writes(&store, author, &query(0, 10_000)).await;
}

/// How many writes the writer of [`one_snapshot_under_outside_writes`] may make per page
/// read: enough that it writes all through each read.
const WRITES_PER_READ: u64 = 20;

/// Reads `list` (which must keep the books of `author` that the writer adds, all on its
/// one page) until the writer has moved its total 50 times, each page's length checked
/// against its total. The writer keeps at most [`WRITES_PER_READ`] writes ahead of the
/// reads, so that pages that grow slower to read on a busy machine still see 50 totals
/// before it has written its most.
pub(super) async fn one_snapshot_under_outside_writes<S: TestStore>(
    store: &Fixture<S>,
    author: i64,
    list: &ListQuery,
) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let reads = std::sync::Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn({
        let (store, stop, reads) = (store.clone(), stop.clone(), reads.clone());
        async move {
            let mut written = 0;
            while !stop.load(Ordering::Relaxed) && written < 2_000 {
                if written >= WRITES_PER_READ * (reads.load(Ordering::Relaxed) + 1) {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    continue;
                }
                let add = OutsideWrite::AddBook {
                    title: format!("Racing {written}"),
                    author_id: author,
                    year: 2020,
                };
                store.outside(add).await;
                written += 1;
            }
            written
        }
    });
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut totals = std::collections::BTreeSet::new();
    while totals.len() < 50 && tokio::time::Instant::now() < deadline && !writer.is_finished() {
        let page = store.list(list).await.expect("list");
        let read = reads.fetch_add(1, Ordering::Relaxed) + 1;
        assert_eq!(
            page.books.len() as u64,
            page.total,
            "read {read}: a page of {} books with a total of {}: two snapshots",
            page.books.len(),
            page.total
        );
        totals.insert(page.total);
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.expect("the writer");
    assert!(
        totals.len() >= 50,
        "the writer moved the total while the pages were read: {} totals in {} reads, \
         {written} writes",
        totals.len(),
        reads.load(Ordering::Relaxed)
    );
}
