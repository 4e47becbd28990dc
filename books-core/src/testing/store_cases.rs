//! The storage contract, case by case (run through [`store_conformance_suite!`](crate::store_conformance_suite)).

#![allow(missing_docs)]

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use http::Request;

use crate::{
    AuthorStore, BookInput, BookPage, BookRecord, BookStore, BooksApi, Config, StoreError,
};

/// A store the conformance suite can drive.
pub trait TestStore: BookStore + AuthorStore + Clone {}
impl<S: BookStore + AuthorStore + Clone> TestStore for S {}

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, day, 10, 4, 5).unwrap()
}

fn input(title: &str, author_id: i64, year: i32) -> BookInput {
    BookInput {
        title: title.to_owned(),
        author_id,
        year,
    }
}

async fn author(store: &impl TestStore, name: &str) -> i64 {
    store.add_author(Some(name)).await.expect("add author")
}

async fn create(store: &impl TestStore, title: &str, author_id: i64) -> i64 {
    store
        .create(&input(title, author_id, 2001), at(1))
        .await
        .expect("create")
        .id
}

async fn titles(store: &impl TestStore, offset: u64, limit: u32) -> (Vec<String>, u64) {
    let page = store.list(offset, limit).await.expect("list");
    (
        page.books.into_iter().map(|b| b.title).collect(),
        page.total,
    )
}

pub async fn empty_store_lists_nothing(store: impl TestStore) {
    let page = store.list(0, 20).await.unwrap();
    assert!(page.books.is_empty());
    assert_eq!(page.total, 0);
}

pub async fn create_then_get_round_trips(store: impl TestStore) {
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

pub async fn get_missing_is_none(store: impl TestStore) {
    assert_eq!(store.get(1).await.unwrap(), None);
    assert_eq!(store.get(i64::MAX).await.unwrap(), None);
    let author = author(&store, "A").await;
    let id = create(&store, "one", author).await;
    assert_eq!(store.get(id + 1).await.unwrap(), None);
}

pub async fn list_orders_by_id_with_page_boundaries(store: impl TestStore) {
    let author = author(&store, "A").await;
    let mut ids = Vec::new();
    for n in 0..7 {
        ids.push(create(&store, &format!("book {n}"), author).await);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let page = store.list(0, 3).await.unwrap();
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

pub async fn list_offset_past_the_end_keeps_total(store: impl TestStore) {
    let author = author(&store, "A").await;
    create(&store, "only", author).await;
    let page = store.list(5, 20).await.unwrap();
    assert!(page.books.is_empty());
    assert_eq!(page.total, 1);
    let far = store.list(i64::MAX as u64, 20).await.unwrap();
    assert!(far.books.is_empty());
    assert_eq!(far.total, 1);
}

pub async fn list_and_get_join_authors(store: impl TestStore) {
    let named = author(&store, "Ursula K. Le Guin").await;
    let nameless = store.add_author(None).await.unwrap();
    let a = create(&store, "named", named).await;
    let b = create(&store, "nameless", nameless).await;
    let page = store.list(0, 20).await.unwrap();
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

pub async fn removed_author_leaves_book_without_author(store: impl TestStore) {
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
    let page = store.list(0, 20).await.unwrap();
    assert_eq!(page.total, 2);
    assert_eq!(page.books[0].author_id, None);
    assert_eq!(
        store.get(b).await.unwrap().unwrap().author_name.as_deref(),
        Some("Kept")
    );
}

pub async fn create_with_missing_author_is_author_not_found(store: impl TestStore) {
    let result = store.create(&input("x", 4242, 2001), at(1)).await;
    assert!(
        matches!(result, Err(StoreError::AuthorNotFound(4242))),
        "{result:?}"
    );
    assert_eq!(store.list(0, 20).await.unwrap().total, 0, "nothing stored");
}

pub async fn update_replaces_fields_and_keeps_created_at(store: impl TestStore) {
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

pub async fn update_of_missing_id_is_none(store: impl TestStore) {
    let author = author(&store, "A").await;
    assert_eq!(
        store
            .update(99, &input("x", author, 2001), at(1))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.list(0, 20).await.unwrap().total,
        0,
        "update never inserts"
    );
}

pub async fn update_with_missing_author_is_author_not_found(store: impl TestStore) {
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

pub async fn delete_removes_only_that_book(store: impl TestStore) {
    let author = author(&store, "A").await;
    let a = create(&store, "a", author).await;
    let b = create(&store, "b", author).await;
    assert!(store.delete(a).await.unwrap());
    assert!(!store.delete(a).await.unwrap());
    assert!(!store.delete(9999).await.unwrap());
    assert_eq!(store.get(a).await.unwrap(), None);
    assert!(store.get(b).await.unwrap().is_some());
    assert_eq!(store.list(0, 20).await.unwrap().total, 1);
}

pub async fn ids_are_never_reused_after_delete(store: impl TestStore) {
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

pub async fn author_exists_matches_authors(store: impl TestStore) {
    let named = author(&store, "A").await;
    let nameless = store.add_author(None).await.unwrap();
    assert_ne!(named, nameless);
    assert!(store.author_exists(named).await.unwrap());
    assert!(store.author_exists(nameless).await.unwrap());
    assert!(!store.author_exists(nameless + 1000).await.unwrap());
    store.remove_author(named).await.unwrap();
    assert!(!store.author_exists(named).await.unwrap());
}

/// 200 creates from 50 concurrent tasks: no error, 200 rows, no duplicate id.
pub async fn concurrent_creates_get_distinct_ids(store: impl TestStore) {
    let author = author(&store, "A").await;
    let tasks: Vec<_> = (0..50)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for n in 0..4 {
                    let book = input(&format!("task {task} book {n}"), author, 2001);
                    ids.push(
                        store
                            .create(&book, at(1))
                            .await
                            .expect("concurrent create")
                            .id,
                    );
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.extend(task.await.expect("task"));
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 200, "distinct ids");
    let page = store.list(0, 500).await.unwrap();
    assert_eq!(page.total, 200);
    assert_eq!(page.books.len(), 200);
    assert_eq!(page.books.iter().map(|b| b.id).collect::<Vec<_>>(), ids);
}

/// 30 creates sent at once (a store may write them together): each gets its own book with
/// its own fields and timestamp, a missing author fails only its own create, and every id
/// is new.
pub async fn creates_sent_together_each_get_their_own_book(store: impl TestStore) {
    let named = author(&store, "Named").await;
    let before = create(&store, "before", named).await;
    let missing = named + 1000;
    let books: Vec<(BookInput, DateTime<Utc>)> = (0..30)
        .map(|n| {
            let author_id = if n % 7 == 3 { missing } else { named };
            let book = input(&format!("together {n}"), author_id, 2000 + n as i32);
            (book, at(1 + n % 28))
        })
        .collect();
    let sent = books.iter().map(|(book, now)| store.create(book, *now));
    let results = futures_util::future::join_all(sent).await;
    let mut ids = Vec::new();
    for ((book, now), result) in books.iter().zip(results) {
        if book.author_id == missing {
            assert!(
                matches!(result, Err(StoreError::AuthorNotFound(id)) if id == missing),
                "{}: {result:?}",
                book.title
            );
            continue;
        }
        let record = result.expect("create");
        let expected = BookRecord {
            id: record.id,
            title: book.title.clone(),
            year: book.year,
            author_id: Some(named),
            author_name: Some("Named".to_owned()),
            created_at: *now,
            updated_at: *now,
        };
        assert_eq!(record, expected);
        assert!(record.id > before, "new id");
        assert_eq!(store.get(record.id).await.unwrap(), Some(record.clone()));
        ids.push(record.id);
    }
    assert_eq!(ids.len(), 26);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 26, "distinct ids");
    assert_eq!(store.list(0, 100).await.unwrap().total, 27);
}

/// A store that removes the author just before each write, as if another client deleted
/// it between validation and the write.
#[derive(Debug)]
struct VanishingAuthor<S>(S);

#[async_trait]
impl<S: TestStore> BookStore for VanishingAuthor<S> {
    async fn list(&self, offset: u64, limit: u32) -> Result<BookPage, StoreError> {
        self.0.list(offset, limit).await
    }
    async fn get(&self, id: i64) -> Result<Option<BookRecord>, StoreError> {
        self.0.get(id).await
    }
    async fn create(&self, book: &BookInput, now: DateTime<Utc>) -> Result<BookRecord, StoreError> {
        self.0.remove_author(book.author_id).await?;
        self.0.create(book, now).await
    }
    async fn update(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
    ) -> Result<Option<BookRecord>, StoreError> {
        self.0.remove_author(book.author_id).await?;
        self.0.update(id, book, now).await
    }
    async fn delete(&self, id: i64) -> Result<bool, StoreError> {
        self.0.delete(id).await
    }
    async fn author_exists(&self, id: i64) -> Result<bool, StoreError> {
        self.0.author_exists(id).await
    }
    async fn update_if(
        &self,
        id: i64,
        book: &BookInput,
        now: DateTime<Utc>,
        precondition: crate::Precondition<'_>,
    ) -> Result<crate::Guarded<Option<BookRecord>>, StoreError> {
        self.0.remove_author(book.author_id).await?;
        self.0.update_if(id, book, now, precondition).await
    }
    async fn delete_if(
        &self,
        id: i64,
        precondition: crate::Precondition<'_>,
    ) -> Result<crate::Guarded<bool>, StoreError> {
        self.0.delete_if(id, precondition).await
    }
    async fn create_keyed(
        &self,
        book: &BookInput,
        now: DateTime<Utc>,
        key: &crate::IdempotencyKey,
    ) -> Result<crate::KeyedCreate, StoreError> {
        self.0.remove_author(book.author_id).await?;
        self.0.create_keyed(book, now, key).await
    }
    async fn idempotency_record(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::IdempotencyRecord>, StoreError> {
        self.0.idempotency_record(key, now).await
    }
    async fn forget_expired_keys(&self, now: DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        self.0.forget_expired_keys(now, limit).await
    }
}

/// An author deleted between validation and the write: 422 on `author_id`, nothing stored
/// (with an idempotency key, nothing kept for it either; with `If-Match`, the same).
pub async fn author_vanishing_before_the_write_is_422(store: impl TestStore) {
    let keep = author(&store, "Kept").await;
    let id = create(&store, "existing", keep).await;
    let api = BooksApi::new(VanishingAuthor(store.clone()), Config::default());
    for (method, path, header) in [
        ("POST", "/api/books".to_owned(), None),
        ("PUT", format!("/api/books/{id}"), None),
        (
            "POST",
            "/api/books".to_owned(),
            Some(("idempotency-key", "vanishing")),
        ),
        ("PUT", format!("/api/books/{id}"), Some(("if-match", "*"))),
    ] {
        let doomed = author(&store, "Doomed").await;
        let mut request = Request::builder().method(method).uri(path);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        let request = request
            .body(format!("title=T&author_id={doomed}&year=2020"))
            .unwrap();
        let response = api.handle(request).await;
        assert_eq!(response.status(), 422, "{method}");
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(
            body["errors"],
            serde_json::json!({"author_id": ["The selected author id is invalid."]}),
            "{method}"
        );
    }
    let page = store.list(0, 20).await.unwrap();
    assert_eq!(page.total, 1, "nothing stored");
    assert_eq!(page.books[0].title, "existing", "nothing changed");
    let kept = store.idempotency_record("vanishing", at(1)).await.unwrap();
    assert_eq!(kept, None, "a failed create leaves its key unused");
}

/// The demo data: 45 books, 50 authors, books without an author or with a nameless one;
/// loaded only into an empty store.
pub async fn demo_data_loads_once_into_an_empty_store(store: impl TestStore) {
    assert!(crate::demo::load_if_empty(&store, at(1)).await.unwrap());
    let page = store.list(0, 100).await.unwrap();
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
    assert!(!crate::demo::load_if_empty(&store, at(2)).await.unwrap());
    assert_eq!(store.list(0, 1).await.unwrap().total, 45);
}

pub async fn reachable_store_is_ready(store: impl TestStore) {
    store
        .ready()
        .await
        .expect("an empty, reachable store is ready");
    let id = author(&store, "A").await;
    store.create(&input("T", id, 2020), at(1)).await.unwrap();
    store.ready().await.expect("and stays ready with data");
    let api = BooksApi::new(store, Config::default());
    api.ready()
        .await
        .expect("the API reports the store's readiness");
}

pub async fn version_changes_with_every_write(store: impl TestStore) {
    async fn version(store: &impl TestStore) -> u64 {
        store
            .version()
            .await
            .expect("version")
            .expect("the store keeps a version")
    }
    let mut last = version(&store).await;
    let mut changed = async |store: &_, what: &str| {
        let now = version(store).await;
        assert!(now > last, "{what}: {now} after {last}");
        last = now;
    };
    let id = author(&store, "A").await;
    changed(&store, "add an author").await;
    let book = store.create(&input("T", id, 2020), at(1)).await.unwrap().id;
    changed(&store, "create").await;
    let before_reads = version(&store).await;
    store.list(0, 10).await.unwrap();
    store.get(book).await.unwrap();
    store.author_exists(id).await.unwrap();
    assert_eq!(version(&store).await, before_reads, "reads leave it alone");
    store
        .update(book, &input("U", id, 2021), at(2))
        .await
        .unwrap();
    changed(&store, "update").await;
    let other = author(&store, "B").await;
    changed(&store, "add another author").await;
    store
        .update(book, &input("U", other, 2021), at(3))
        .await
        .unwrap();
    changed(&store, "update to another author").await;
    assert!(store.remove_author(other).await.unwrap());
    changed(&store, "remove the book's author").await;
    assert!(store.delete(book).await.unwrap());
    changed(&store, "delete").await;
}

/// The version check's tally ([`BooksTally`](crate::BooksTally)) tells creates from
/// every other write: after creates alone the new reading is "only appended" to the old
/// one; after an update, a delete or any author write it is not.
pub async fn version_tally_tells_creates_from_other_writes(store: impl TestStore) {
    async fn reading(store: &impl TestStore, above: i64) -> crate::BooksTally {
        let reading = store
            .check_version(above)
            .await
            .expect("check")
            .expect("the store keeps a version");
        let tally = reading.books.expect("the store keeps a tally");
        assert_eq!(tally.above, above, "the id asked about");
        tally
    }
    let id = author(&store, "A").await;
    let empty = reading(&store, i64::MAX).await;
    assert_eq!((empty.total, empty.max_id, empty.count_above), (0, 0, 0));
    let first = create(&store, "T", id).await;
    let second = create(&store, "U", id).await;
    let after = reading(&store, empty.max_id).await;
    assert_eq!((after.total, after.max_id), (2, second));
    assert_eq!(after.count_above, 2, "books above {}", empty.max_id);
    assert!(
        after.only_appended_since(&empty),
        "creates: {after:?} after {empty:?}"
    );
    create(&store, "V", id).await;
    let more = reading(&store, after.max_id).await;
    assert!(more.only_appended_since(&after), "a third create");
    assert_eq!(more.count_above, 1);

    let mut last = more;
    let mut other_write = async |store: &_, what: &str| {
        let now = reading(store, last.max_id).await;
        assert!(
            !now.only_appended_since(&last),
            "{what}: {now:?} after {last:?}"
        );
        last = now;
    };
    store
        .update(first, &input("W", id, 2021), at(2))
        .await
        .unwrap();
    other_write(&store, "update").await;
    let other = author(&store, "B").await;
    other_write(&store, "add an author").await;
    assert!(store.remove_author(other).await.unwrap());
    other_write(&store, "remove an author").await;
    assert!(store.delete(second).await.unwrap());
    other_write(&store, "delete").await;
}

/// Pages and books come with the version they were read at (same round trip): the
/// version a check reads before and after, moving with writes.
pub async fn reads_carry_their_version(store: impl TestStore) {
    let current = async || store.version().await.unwrap().expect("a version");
    let empty = store.list(0, 20).await.unwrap();
    assert_eq!(empty.version, Some(current().await), "an empty page");
    let id = author(&store, "A").await;
    let book = create(&store, "T", id).await;
    let now = current().await;
    let page = store.list(0, 20).await.unwrap();
    assert_eq!((page.books.len(), page.version), (1, Some(now)), "a page");
    let past = store.list(5, 20).await.unwrap();
    assert_eq!((past.total, past.version), (1, Some(now)), "past the end");
    let (found, version) = store.get_versioned(book).await.unwrap();
    assert_eq!(found.map(|b| b.id), Some(book));
    assert_eq!(version, Some(now), "a book");
    create(&store, "U", id).await;
    let (_, later) = store.get_versioned(book).await.unwrap();
    assert!(later > Some(now), "a write moves it: {later:?} after {now}");
    assert_eq!(store.list(0, 20).await.unwrap().version, later);
}

/// A version the store knows without asking ([`BookStore::known_version`]) is never
/// ahead of the one it reads, and after each write catches up with it within 5 s (or
/// gives way: `None` sends the API to ask).
pub async fn known_version_catches_up(store: impl TestStore) {
    async fn settles(store: &impl TestStore, what: &str) {
        let read = store.version().await.unwrap().expect("a version");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let known = store.known_version();
            assert!(
                known <= Some(read),
                "{what}: known {known:?} ahead of {read}"
            );
            if known.is_none_or(|known| known == read) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: known {known:?} still behind {read} after 5 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    settles(&store, "at start").await;
    let id = author(&store, "A").await;
    settles(&store, "add an author").await;
    let book = create(&store, "T", id).await;
    settles(&store, "create").await;
    store
        .update(book, &input("U", id, 2021), at(2))
        .await
        .unwrap();
    settles(&store, "update").await;
    store.delete(book).await.unwrap();
    settles(&store, "delete").await;
}

/// Pages at every kind of offset (inside the first 1,024 ids, at and across range
/// boundaries, the last book, past the end) match a walk through the ids, before and
/// after deletes in the middle and at both ends, and while deletes happen between pages.
pub async fn deep_pages_stay_exact_across_ranges(store: impl TestStore) {
    async fn check(store: &impl TestStore, ids: &[i64], offsets: &[usize]) {
        for &offset in offsets {
            let page = store.list(offset as u64, 20).await.unwrap();
            let got: Vec<i64> = page.books.iter().map(|b| b.id).collect();
            let want: Vec<i64> = ids.iter().skip(offset).take(20).copied().collect();
            assert_eq!(got, want, "offset {offset}");
            assert_eq!(page.total, ids.len() as u64, "total at offset {offset}");
        }
    }
    use futures_util::StreamExt;
    let author = author(&store, "A").await;
    let mut ids: Vec<i64> = futures_util::stream::iter(0..1400)
        .map(|n| {
            let store = store.clone();
            async move {
                let book = input(&format!("Book {n}"), author, 2020);
                store.create(&book, at(1)).await.unwrap().id
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    ids.sort_unstable();
    let offsets = |len: usize| {
        [0, 1, 19, 1000, 1022, 1023, 1024, 1025, 1100]
            .into_iter()
            .chain([len.saturating_sub(1), len, len + 7])
            .collect::<Vec<_>>()
    };
    check(&store, &ids, &offsets(ids.len())).await;

    let middle: Vec<i64> = ids[1010..1030].to_vec();
    let ends = [ids[0], ids[1], ids[ids.len() - 1], ids[ids.len() - 2]];
    for victim in middle.iter().chain(&ends) {
        assert!(store.delete(*victim).await.unwrap());
        ids.retain(|id| id != victim);
    }
    check(&store, &ids, &offsets(ids.len())).await;

    let mut offset = 0;
    while offset < ids.len() {
        check(&store, &ids, &[offset]).await;
        for victim in [ids.get(offset + 500).copied(), ids.get(offset / 2).copied()]
            .into_iter()
            .flatten()
        {
            assert!(store.delete(victim).await.unwrap());
            ids.retain(|&id| id != victim);
        }
        offset += 250;
    }
    check(&store, &ids, &offsets(ids.len())).await;
}

/// `update_if` and `delete_if` ask the precondition about the book as it is (joined
/// with its author) and write only if it holds; a missing book is not asked about.
pub async fn conditional_writes_check_the_book_as_it_is(store: impl TestStore) {
    use crate::Guarded;
    let author = author(&store, "Ann").await;
    let id = create(&store, "Start", author).await;
    let current = store.get(id).await.unwrap().unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let refuse = |book: &BookRecord| {
        seen.lock().unwrap().push(book.clone());
        false
    };
    let edit = input("Edited", author, 2002);
    let refused = store.update_if(id, &edit, at(2), &refuse).await.unwrap();
    assert_eq!(refused, Guarded::Refused(current.clone()));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![current.clone()],
        "asked about the book as it is"
    );
    assert_eq!(
        current.author_name.as_deref(),
        Some("Ann"),
        "with its author"
    );
    assert_eq!(
        store.get(id).await.unwrap(),
        Some(current.clone()),
        "nothing changed"
    );
    assert_eq!(
        store.delete_if(id, &refuse).await.unwrap(),
        Guarded::Refused(current.clone())
    );
    assert!(store.get(id).await.unwrap().is_some());

    let unasked = |_: &BookRecord| -> bool { panic!("a missing book is not asked about") };
    let missing = store.update_if(id + 100, &edit, at(2), &unasked).await;
    assert_eq!(missing.unwrap(), Guarded::Done(None));
    assert_eq!(
        store.delete_if(id + 100, &unasked).await.unwrap(),
        Guarded::Done(false)
    );

    let allow = |_: &BookRecord| true;
    let Guarded::Done(Some(updated)) = store.update_if(id, &edit, at(2), &allow).await.unwrap()
    else {
        panic!("updated");
    };
    assert_eq!(updated.title, "Edited");
    assert_eq!(updated.updated_at, at(2));
    assert_eq!(store.get(id).await.unwrap(), Some(updated));
    let missing_author = input("Edited", author + 100, 2002);
    let result = store.update_if(id, &missing_author, at(3), &allow).await;
    assert!(
        matches!(result, Err(StoreError::AuthorNotFound(_))),
        "{result:?}"
    );
    assert_eq!(
        store.delete_if(id, &allow).await.unwrap(),
        Guarded::Done(true)
    );
    assert_eq!(store.get(id).await.unwrap(), None);
}

/// Sixteen conditional updates at once that each expect the book as it was: exactly one
/// is written, the others are refused with the book the winner wrote.
pub async fn concurrent_conditional_updates_let_one_through(store: impl TestStore) {
    use crate::Guarded;
    let author = author(&store, "Ann").await;
    let id = create(&store, "Start", author).await;
    let unchanged = |book: &BookRecord| book.title == "Start";
    let writes = (0..16).map(|n| {
        let (store, edit) = (store.clone(), input(&format!("Writer {n}"), author, 2002));
        async move { store.update_if(id, &edit, at(2), &unchanged).await.unwrap() }
    });
    let outcomes = futures_util::future::join_all(writes).await;
    let written: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            Guarded::Done(Some(book)) => Some(book.title.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(written.len(), 1, "{outcomes:?}");
    for outcome in &outcomes {
        if let Guarded::Refused(book) = outcome {
            assert_eq!(book.title, written[0], "refused with the winner's book");
        }
    }
    assert_eq!(store.get(id).await.unwrap().unwrap().title, written[0]);
}

fn answer_for(book: &BookRecord) -> crate::StoredAnswer {
    crate::StoredAnswer {
        status: 201,
        content_type: "application/json".into(),
        location: format!("http://books.test/api/books/{}", book.id),
        etag: format!("\"{}\"", book.id),
        body: format!("{{\"id\":{},\"title\":\"{}\"}}", book.id, book.title).into_bytes(),
    }
}

fn key(name: &str, fingerprint: u8, expires_at: DateTime<Utc>) -> crate::IdempotencyKey {
    crate::IdempotencyKey {
        key: name.to_owned(),
        fingerprint: vec![fingerprint; 32],
        expires_at,
        answer: std::sync::Arc::new(answer_for),
    }
}

/// A keyed create keeps the key's record with the book; the key is taken until its
/// record expires, then a create replaces it; expired records are forgotten in batches.
pub async fn keyed_creates_keep_their_record_with_the_book(store: impl TestStore) {
    use crate::KeyedCreate;
    let author = author(&store, "Ann").await;
    let first = key("order-7", 1, at(10));
    let created = store
        .create_keyed(&input("Kept", author, 2001), at(1), &first)
        .await;
    let KeyedCreate::Created(book) = created.unwrap() else {
        panic!("created");
    };
    assert_eq!(store.get(book.id).await.unwrap(), Some(book.clone()));
    let record = store.idempotency_record("order-7", at(2)).await.unwrap();
    let record = record.expect("kept");
    assert_eq!(record.fingerprint, vec![1; 32]);
    assert_eq!(record.answer, answer_for(&book));
    assert_eq!(
        store.idempotency_record("other", at(2)).await.unwrap(),
        None
    );

    let again = key("order-7", 2, at(10));
    let taken = store
        .create_keyed(&input("Twice", author, 2001), at(2), &again)
        .await;
    assert_eq!(taken.unwrap(), KeyedCreate::Taken);
    assert_eq!(store.list(0, 10).await.unwrap().total, 1, "nothing written");
    let missing_author = key("order-8", 1, at(10));
    let orphan = input("X", author + 100, 2001);
    let failed = store.create_keyed(&orphan, at(2), &missing_author).await;
    assert!(matches!(failed, Err(StoreError::AuthorNotFound(_))));
    assert_eq!(
        store.idempotency_record("order-8", at(2)).await.unwrap(),
        None,
        "unused"
    );

    assert_eq!(
        store.idempotency_record("order-7", at(10)).await.unwrap(),
        None,
        "expired"
    );
    let later = key("order-7", 3, at(20));
    let replaced = store
        .create_keyed(&input("Later", author, 2001), at(11), &later)
        .await;
    assert!(matches!(replaced.unwrap(), KeyedCreate::Created(_)));
    let record = store.idempotency_record("order-7", at(11)).await.unwrap();
    assert_eq!(record.unwrap().fingerprint, vec![3; 32]);

    for n in 0..5 {
        let old = key(&format!("old-{n}"), 1, at(3));
        let book = input("Old", author, 2001);
        store.create_keyed(&book, at(2), &old).await.unwrap();
    }
    assert_eq!(
        store.forget_expired_keys(at(12), 3).await.unwrap(),
        3,
        "a batch"
    );
    assert_eq!(store.forget_expired_keys(at(12), 3).await.unwrap(), 2);
    assert_eq!(store.forget_expired_keys(at(12), 3).await.unwrap(), 0);
    assert!(
        store
            .idempotency_record("order-7", at(12))
            .await
            .unwrap()
            .is_some(),
        "unexpired records stay"
    );
}

/// Keyed creates sent at once (which a store may write together): each distinct key
/// gets its book; of several with one key, exactly one is written.
pub async fn keyed_creates_sent_together_each_keep_their_key(store: impl TestStore) {
    use crate::KeyedCreate;
    let author = author(&store, "Ann").await;
    let names: Vec<String> = (0..12).map(|n| format!("key-{}", n % 9)).collect();
    let creates = names.iter().map(|name| {
        let store = store.clone();
        let key = key(name, 1, at(10));
        async move {
            store
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
    assert_eq!(store.list(0, 20).await.unwrap().total, 9);
    for n in 0..9 {
        let record = store
            .idempotency_record(&format!("key-{n}"), at(2))
            .await
            .unwrap();
        let body = String::from_utf8(record.expect("kept").answer.body).unwrap();
        assert!(body.contains(&format!("key-{n}")), "its own book: {body}");
    }
}
