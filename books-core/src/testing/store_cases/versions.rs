//! The versions tier and its tally: every rule of [`Versions`] and [`BooksTally`], with
//! writes the store does not make in between ([`Outside`]). A version kept in the
//! store's memory fails them, unless nothing else can write the store at all.

use http::Request;
use serde_json::Value;

use super::*;
use crate::api::BooksApi;
use crate::config::Config;
use crate::store::{BooksTally, Versions};

fn versions<S: TestStore>(store: &S) -> &dyn Versions {
    store
        .capabilities()
        .versions()
        .expect("the store has the versions tier")
}

async fn version(store: &impl TestStore) -> u64 {
    versions(store).version().await.expect("version")
}

/// Rules 1 and 2: the version grows with every write, the store's own and those from
/// outside it, and reads leave it alone.
pub async fn version_moves_with_every_write<S: TestStore>(store: S, outside: Outside<S>) {
    let mut last = version(&store).await;
    let mut moved = async |store: &S, what: &str| {
        let now = version(store).await;
        assert!(now > last, "{what}: {now} after {last}");
        last = now;
    };
    let id = author(&store, "A").await;
    moved(&store, "add an author").await;
    let book = create(&store, "T", id).await;
    moved(&store, "create").await;
    let before_reads = version(&store).await;
    store.list(&query(0, 10)).await.unwrap();
    store.get(book).await.unwrap();
    store.author_exists(id).await.unwrap();
    versions(&store)
        .list_versioned(&query(0, 10))
        .await
        .unwrap();
    versions(&store).get_versioned(book).await.unwrap();
    assert_eq!(version(&store).await, before_reads, "reads leave it alone");
    store
        .update(book, &input("U", id, 2021), at(2))
        .await
        .unwrap();
    moved(&store, "update").await;
    let other = author(&store, "B").await;
    moved(&store, "add another author").await;
    store
        .update(book, &input("U", other, 2021), at(3))
        .await
        .unwrap();
    moved(&store, "update to another author").await;
    assert!(store.remove_author(other).await.unwrap());
    moved(&store, "remove the book's author").await;
    assert!(store.delete(book).await.unwrap());
    moved(&store, "delete").await;

    let book = create(&store, "Outside", id).await;
    moved(&store, "create").await;
    for write in [
        OutsideWrite::AddBook {
            title: "Added outside".into(),
            author_id: id,
            year: 2020,
        },
        OutsideWrite::Retitle {
            id: book,
            title: "Retitled outside".into(),
        },
        OutsideWrite::RenameAuthor {
            id,
            name: "Renamed outside".into(),
        },
        OutsideWrite::DeleteBook { id: book },
    ] {
        let what = format!("{write:?} from outside the store");
        if outside.write(&store, write).await {
            moved(&store, &what).await;
        }
    }
}

/// Rule 4: pages and books come with the version they were read at, which moves with
/// writes, from outside the store too.
pub async fn reads_carry_their_version<S: TestStore>(store: S, outside: Outside<S>) {
    let v = versions(&store);
    let (empty, at_empty) = v.list_versioned(&query(0, 20)).await.unwrap();
    assert!(empty.books.is_empty());
    assert_eq!(at_empty, version(&store).await, "an empty page");
    let id = author(&store, "A").await;
    let book = create(&store, "T", id).await;
    let now = version(&store).await;
    let (found, at) = v.list_versioned(&query(0, 20)).await.unwrap();
    assert_eq!((found.books.len(), at), (1, now), "a page");
    let (past, at) = v.list_versioned(&query(5, 20)).await.unwrap();
    assert_eq!((past.total, at), (1, now), "past the end");
    let (one, at) = v.get_versioned(book).await.unwrap();
    assert_eq!((one.map(|b| b.id), at), (Some(book), now), "a book");
    let (missing, at) = v.get_versioned(book + 1000).await.unwrap();
    assert_eq!((missing, at), (None, now), "a missing book");
    create(&store, "U", id).await;
    let (_, later) = v.get_versioned(book).await.unwrap();
    assert!(later > now, "a write moves it: {later} after {now}");
    assert_eq!(v.list_versioned(&query(0, 20)).await.unwrap().1, later);

    let retitle = OutsideWrite::Retitle {
        id: book,
        title: "Retitled".into(),
    };
    if outside.write(&store, retitle).await {
        let (one, at) = v.get_versioned(book).await.unwrap();
        assert_eq!(one.expect("still there").title, "Retitled");
        assert!(at > later, "read with the outside write's version");
    }
    let rename = OutsideWrite::RenameAuthor {
        id,
        name: "Renamed".into(),
    };
    if outside.write(&store, rename).await {
        let (found, at) = v.list_versioned(&query(0, 20)).await.unwrap();
        assert_eq!(found.books[0].author_name.as_deref(), Some("Renamed"));
        assert_eq!(at, version(&store).await);
    }
}

/// Rule 5: a version the store knows without asking is never ahead of the one it reads,
/// and after each write catches up with it within 5 s (or gives way: `None`).
pub async fn known_version_catches_up<S: TestStore>(store: S, outside: Outside<S>) {
    async fn settles(store: &impl TestStore, what: &str) {
        let read = version(store).await;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let known = versions(store).known_version();
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
    let retitle = OutsideWrite::Retitle {
        id: book,
        title: "Outside".into(),
    };
    if outside.write(&store, retitle).await {
        settles(&store, "a write from outside").await;
    }
    store.delete(book).await.unwrap();
    settles(&store, "delete").await;
}

/// Rule 1 through the API: after a write the API did not make (through the store's own
/// methods, and from outside the store), its cached pages and books are never served
/// again, and an old `ETag` gets a 200, not a 304. (A store that knows its version
/// without asking may lag by its documented bound: each read waits until its known
/// version caught up.)
pub async fn cached_reads_see_writes_from_outside<S: TestStore>(store: S, outside: Outside<S>) {
    let api = BooksApi::new(store.clone(), Config::default());
    let get = async |path: &str, tag: Option<&str>| -> (u16, Value, Option<String>) {
        caught_up(&store).await;
        let mut request = Request::get(path);
        if let Some(tag) = tag {
            request = request.header("if-none-match", tag);
        }
        let response = api.handle(request.body(String::new()).unwrap()).await;
        let status = response.status().as_u16();
        let tag = response
            .headers()
            .get("etag")
            .map(|t| t.to_str().unwrap().to_owned());
        let body = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        (status, body, tag)
    };
    // Each read twice: a miss that keeps the answer, then a hit.
    let warm = async |path: &str| {
        get(path, None).await;
        get(path, None).await
    };
    let ann = author(&store, "Ann").await;
    let id = create(&store, "Dune", ann).await;
    let book = format!("/api/books/{id}?include=author");

    // Through the store's own methods, behind the API's back.
    let (_, _, tag) = warm(&book).await;
    store
        .update(id, &input("Dune Messiah", ann, 2001), at(2))
        .await
        .unwrap();
    let (status, body, _) = get(&book, tag.as_deref()).await;
    assert_eq!(
        (status, &body["title"]),
        (200, &Value::from("Dune Messiah"))
    );
    warm("/api/books").await;
    create(&store, "Children of Dune", ann).await;
    assert_eq!(get("/api/books", None).await.1["meta"]["total"], 2);
    warm(&book).await;
    assert!(store.remove_author(ann).await.unwrap());
    assert_eq!(get(&book, None).await.1["author"], Value::Null);

    // From outside the store: a host's SQL, another process.
    let bea = author(&store, "Bea").await;
    store
        .update(id, &input("Dune", bea, 2001), at(3))
        .await
        .unwrap();
    let (_, _, tag) = warm(&book).await;
    let rename = OutsideWrite::RenameAuthor {
        id: bea,
        name: "Bea Renamed".into(),
    };
    if outside.write(&store, rename).await {
        let (status, body, _) = get(&book, tag.as_deref()).await;
        assert_eq!(status, 200, "the old tag is stale");
        assert_eq!(body["author"]["name"], "Bea Renamed");
    }
    warm(&book).await;
    let retitle = OutsideWrite::Retitle {
        id,
        title: "Retitled".into(),
    };
    if outside.write(&store, retitle).await {
        assert_eq!(get(&book, None).await.1["title"], "Retitled");
    }
    warm("/api/books").await;
    let add = OutsideWrite::AddBook {
        title: "Added".into(),
        author_id: bea,
        year: 2020,
    };
    if outside.write(&store, add).await {
        assert_eq!(get("/api/books", None).await.1["meta"]["total"], 3);
    }
    warm(&book).await;
    warm("/api/books").await;
    if outside.write(&store, OutsideWrite::DeleteBook { id }).await {
        assert_eq!(get(&book, None).await.0, 404);
        let list = get("/api/books", None).await.1;
        assert!(
            list["data"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["id"] != id)
        );
    }
}

/// Waits (up to 5 s) until the version the store knows without asking, if it knows one,
/// is the one it reads.
pub(super) async fn caught_up(store: &impl TestStore) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let current = version(store).await;
    while versions(store)
        .known_version()
        .is_some_and(|known| known < current)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

async fn tallied(store: &impl TestStore, above: i64) -> BooksTally {
    let tally = store
        .capabilities()
        .version_tally()
        .expect("the store has the version tally");
    let (version, tally) = tally.tallied_version(above).await.expect("tally");
    assert_eq!(version, self::version(store).await, "the version with it");
    assert_eq!(tally.above, above, "the id asked about");
    tally
}

/// The tally tells creates (anyone's) from every other write: after creates alone the
/// new reading is "only appended" to the old one; after an update, a delete or any
/// author write it is not, whoever wrote.
pub async fn version_tally_tells_creates_from_other_writes<S: TestStore>(
    store: S,
    outside: Outside<S>,
) {
    let id = author(&store, "A").await;
    let empty = tallied(&store, i64::MAX).await;
    assert_eq!((empty.total, empty.max_id, empty.count_above), (0, 0, 0));
    let first = create(&store, "T", id).await;
    let second = create(&store, "U", id).await;
    let after = tallied(&store, empty.max_id).await;
    assert_eq!((after.total, after.max_id), (2, second));
    assert_eq!(after.count_above, 2, "books above {}", empty.max_id);
    assert!(
        after.only_appended_since(&empty),
        "creates: {after:?} after {empty:?}"
    );
    create(&store, "V", id).await;
    let mut last = tallied(&store, after.max_id).await;
    assert!(last.only_appended_since(&after), "a third create");
    assert_eq!(last.count_above, 1);
    let add = OutsideWrite::AddBook {
        title: "W".into(),
        author_id: id,
        year: 2020,
    };
    if outside.write(&store, add).await {
        let now = tallied(&store, last.max_id).await;
        assert!(now.only_appended_since(&last), "a create from outside");
        last = now;
    }

    let mut other_write = async |store: &S, what: &str| {
        let now = tallied(store, last.max_id).await;
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
    for write in [
        OutsideWrite::Retitle {
            id: first,
            title: "X".into(),
        },
        OutsideWrite::RenameAuthor {
            id,
            name: "Y".into(),
        },
        OutsideWrite::DeleteBook { id: first },
    ] {
        let what = format!("{write:?} from outside");
        if outside.write(&store, write).await {
            other_write(&store, &what).await;
        }
    }
}
