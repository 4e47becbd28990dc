//! The versions tier and its tally: every rule of [`Versions`] and [`BooksTally`], with
//! the store's own writes, and (for a store whose suite has a hook) writes the store
//! does not make and a backup restored under it. A version kept in the store's memory
//! fails them, unless nothing else can write the store at all.

use http::Request;
use serde_json::Value;

use super::*;
use crate::api::BooksApi;
use crate::config::Config;
use crate::store::{BooksTally, Version, VersionTally, Versions};

async fn version(store: &impl Versions) -> Version {
    store.version().await.expect("version")
}

/// Asserts that the version moved on (in the same history) since `last`, and returns it.
async fn moved(store: &impl Versions, last: Version, what: &str) -> Version {
    let now = version(store).await;
    assert_eq!(now.history, last.history, "{what}: the same history");
    assert!(now.count > last.count, "{what}: {now:?} after {last:?}");
    now
}

/// The writes from outside the store that the cases make, for a book and its author.
fn outside_writes(book: i64, author: i64) -> [OutsideWrite; 4] {
    [
        OutsideWrite::AddBook {
            title: "Added outside".into(),
            author_id: author,
            year: 2020,
        },
        OutsideWrite::Retitle {
            id: book,
            title: "Retitled outside".into(),
        },
        OutsideWrite::RenameAuthor {
            id: author,
            name: "Renamed outside".into(),
        },
        OutsideWrite::DeleteBook { id: book },
    ]
}

/// Rules 1 and 2: the version grows with every write of the store's, and reads leave it
/// alone.
pub async fn version_moves_with_every_write<S: TestStore + Versions>(store: Fixture<S>) {
    let mut last = version(&*store).await;
    let id = author(&store, "A").await;
    last = moved(&*store, last, "add an author").await;
    let book = create(&store, "T", id).await;
    last = moved(&*store, last, "create").await;
    store.list(&query(0, 10)).await.unwrap();
    store.get(book).await.unwrap();
    store.author_exists(id).await.unwrap();
    store.list_versioned(&query(0, 10)).await.unwrap();
    store.get_versioned(book).await.unwrap();
    assert_eq!(version(&*store).await, last, "reads leave it alone");
    store
        .update(book, &input("U", id, 2021), at(2))
        .await
        .unwrap();
    last = moved(&*store, last, "update").await;
    let other = author(&store, "B").await;
    last = moved(&*store, last, "add another author").await;
    store
        .update(book, &input("U", other, 2021), at(3))
        .await
        .unwrap();
    last = moved(&*store, last, "update to another author").await;
    assert!(store.remove_author(other).await.unwrap());
    last = moved(&*store, last, "remove the book's author").await;
    assert!(store.delete(book).await.unwrap());
    moved(&*store, last, "delete").await;
}

/// Rule 1 from outside: each write the store did not make (a host's SQL, another
/// process) moves the version too.
pub async fn version_moves_with_writes_from_outside<S: TestStore + Versions>(store: Fixture<S>) {
    let id = author(&store, "A").await;
    let book = create(&store, "Outside", id).await;
    let mut last = version(&*store).await;
    for write in outside_writes(book, id) {
        let what = format!("{write:?} from outside the store");
        store.outside(write).await;
        last = moved(&*store, last, &what).await;
    }
}

/// Rule 4: pages and books come with the count they were read at, which moves with
/// writes.
pub async fn reads_carry_their_version<S: TestStore + Versions>(store: Fixture<S>) {
    let (empty, at_empty) = store.list_versioned(&query(0, 20)).await.unwrap();
    assert!(empty.books.is_empty());
    assert_eq!(at_empty, version(&*store).await.count, "an empty page");
    let id = author(&store, "A").await;
    let book = create(&store, "T", id).await;
    let now = version(&*store).await.count;
    let (found, at) = store.list_versioned(&query(0, 20)).await.unwrap();
    assert_eq!((found.books.len(), at), (1, now), "a page");
    let (past, at) = store.list_versioned(&query(5, 20)).await.unwrap();
    assert_eq!((past.total, at), (1, now), "past the end");
    let (one, at) = store.get_versioned(book).await.unwrap();
    assert_eq!((one.map(|b| b.id), at), (Some(book), now), "a book");
    let (missing, at) = store.get_versioned(book + 1000).await.unwrap();
    assert_eq!((missing, at), (None, now), "a missing book");
    create(&store, "U", id).await;
    let (_, later) = store.get_versioned(book).await.unwrap();
    assert!(later > now, "a write moves it: {later} after {now}");
    assert_eq!(store.list_versioned(&query(0, 20)).await.unwrap().1, later);
}

/// Rule 4 from outside: a read after a write the store did not make shows it, with the
/// count it moved to.
pub async fn reads_carry_writes_from_outside<S: TestStore + Versions>(store: Fixture<S>) {
    let id = author(&store, "A").await;
    let book = create(&store, "T", id).await;
    let before = version(&*store).await.count;
    store
        .outside(OutsideWrite::Retitle {
            id: book,
            title: "Retitled".into(),
        })
        .await;
    let (one, at) = store.get_versioned(book).await.unwrap();
    assert_eq!(one.expect("still there").title, "Retitled");
    assert!(at > before, "read with the outside write's count");
    store
        .outside(OutsideWrite::RenameAuthor {
            id,
            name: "Renamed".into(),
        })
        .await;
    let (found, at) = store.list_versioned(&query(0, 20)).await.unwrap();
    assert_eq!(found.books[0].author_name.as_deref(), Some("Renamed"));
    assert_eq!(at, version(&*store).await.count);
}

/// Rule 5, for a store that knows its version without asking: it is never ahead of the
/// one it reads, and after each write of the store's catches up with it within 5 s (or
/// gives way: `None`).
pub async fn known_version_catches_up<S: TestStore + Versions>(store: Fixture<S>) {
    settles(&*store, "at start").await;
    let id = author(&store, "A").await;
    settles(&*store, "add an author").await;
    let book = create(&store, "T", id).await;
    settles(&*store, "create").await;
    store
        .update(book, &input("U", id, 2021), at(2))
        .await
        .unwrap();
    settles(&*store, "update").await;
    store.delete(book).await.unwrap();
    settles(&*store, "delete").await;
    assert!(
        store.known_version().is_some(),
        "a store listed with `known_version` knows its version while nothing fails"
    );
}

/// Rule 5 from outside: the known version catches up with writes the store did not make.
pub async fn known_version_catches_up_with_writes_from_outside<S: TestStore + Versions>(
    store: Fixture<S>,
) {
    let id = author(&store, "A").await;
    let book = create(&store, "T", id).await;
    settles(&*store, "create").await;
    for write in outside_writes(book, id) {
        let what = format!("{write:?} from outside the store");
        store.outside(write).await;
        settles(&*store, &what).await;
    }
}

/// Waits (up to 5 s) for the known version to be the one `version` reads (or `None`);
/// fails if it is ever ahead of it.
async fn settles(store: &impl Versions, what: &str) {
    let read = version(store).await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let known = store.known_version();
        if let Some(known) = known {
            assert_eq!(known.history, read.history, "{what}: the same history");
            assert!(
                known.count <= read.count,
                "{what}: known {known:?} ahead of {read:?}"
            );
        }
        if known.is_none_or(|known| known == read) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: known {known:?} still behind {read:?} after 5 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// An API over the fixture's store, and a GET through it that waits for a pushed version
/// to catch up first: the status, the JSON body and the `ETag`.
struct Client<S> {
    api: BooksApi,
    store: Fixture<S>,
}

impl<S: TestStore> Client<S> {
    fn new(store: &Fixture<S>) -> Self {
        Self {
            api: BooksApi::new(store.store(), Config::default()),
            store: store.clone(),
        }
    }

    async fn get(&self, path: &str, tag: Option<&str>) -> (u16, Value, Option<String>) {
        self.store.settle().await;
        let mut request = Request::get(path);
        if let Some(tag) = tag {
            request = request.header("if-none-match", tag);
        }
        let response = self.api.handle(request.body(String::new()).unwrap()).await;
        let status = response.status().as_u16();
        let tag = response
            .headers()
            .get("etag")
            .map(|t| t.to_str().unwrap().to_owned());
        let body = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        (status, body, tag)
    }

    /// Each read twice: a miss that keeps the answer, then a hit.
    async fn warm(&self, path: &str) -> (u16, Value, Option<String>) {
        self.get(path, None).await;
        self.get(path, None).await
    }
}

/// Rule 1 through the API: after a write the API did not make (through the store's own
/// methods, behind the API's back), its cached pages and books are never served again,
/// and an old `ETag` gets a 200, not a 304.
pub async fn cached_reads_see_writes_behind_the_api<S: TestStore + Versions>(store: Fixture<S>) {
    let client = Client::new(&store);
    let ann = author(&store, "Ann").await;
    let id = create(&store, "Dune", ann).await;
    let book = format!("/api/books/{id}?include=author");
    let (_, _, tag) = client.warm(&book).await;
    store
        .update(id, &input("Dune Messiah", ann, 2001), at(2))
        .await
        .unwrap();
    let (status, body, _) = client.get(&book, tag.as_deref()).await;
    assert_eq!(
        (status, &body["title"]),
        (200, &Value::from("Dune Messiah"))
    );
    client.warm("/api/books").await;
    create(&store, "Children of Dune", ann).await;
    assert_eq!(client.get("/api/books", None).await.1["meta"]["total"], 2);
    client.warm(&book).await;
    assert!(store.remove_author(ann).await.unwrap());
    assert_eq!(client.get(&book, None).await.1["author"], Value::Null);
}

/// Rule 1 from outside: after a host's SQL (another process) wrote, cached pages and
/// books are never served again.
pub async fn cached_reads_see_writes_from_outside<S: TestStore + Versions>(store: Fixture<S>) {
    let client = Client::new(&store);
    let bea = author(&store, "Bea").await;
    let id = create(&store, "Dune", bea).await;
    let book = format!("/api/books/{id}?include=author");
    let (_, _, tag) = client.warm(&book).await;
    store
        .outside(OutsideWrite::RenameAuthor {
            id: bea,
            name: "Bea Renamed".into(),
        })
        .await;
    let (status, body, _) = client.get(&book, tag.as_deref()).await;
    assert_eq!(status, 200, "the old tag is stale");
    assert_eq!(body["author"]["name"], "Bea Renamed");
    client.warm(&book).await;
    store
        .outside(OutsideWrite::Retitle {
            id,
            title: "Retitled".into(),
        })
        .await;
    assert_eq!(client.get(&book, None).await.1["title"], "Retitled");
    client.warm("/api/books").await;
    store
        .outside(OutsideWrite::AddBook {
            title: "Added".into(),
            author_id: bea,
            year: 2020,
        })
        .await;
    assert_eq!(client.get("/api/books", None).await.1["meta"]["total"], 2);
    client.warm(&book).await;
    client.warm("/api/books").await;
    store.outside(OutsideWrite::DeleteBook { id }).await;
    assert_eq!(client.get(&book, None).await.0, 404);
    let list = client.get("/api/books", None).await.1;
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["id"] != id)
    );
}

/// Rule 2 when history is rewritten: a backup restored under running processes (or a
/// failover to a standby that missed the last writes) takes the data and the version
/// back. No answer kept before shows what the database no longer holds, nor hides what
/// it holds: neither before the next write nor after it (which may bring the count back
/// to where it was).
pub async fn a_restored_backup_is_never_served_from_the_cache<S: TestStore + Versions>(
    store: Fixture<S>,
) {
    let client = Client::new(&store);
    let ann = author(&store, "Ann").await;
    let kept = create(&store, "Kept", ann).await;
    store
        .outside(OutsideWrite::Snapshot {
            name: "backup".into(),
        })
        .await;
    let lost = create(&store, "Lost", ann).await;
    store
        .update(kept, &input("Changed", ann, 2001), at(2))
        .await
        .unwrap();
    let kept_path = format!("/api/books/{kept}");
    let lost_path = format!("/api/books/{lost}");
    for path in [kept_path.as_str(), lost_path.as_str(), "/api/books"] {
        assert_eq!(client.warm(path).await.0, 200, "{path}");
    }
    let shows = async |what: &str, titles: &[&str]| {
        let list = client.get("/api/books", None).await.1;
        let listed: Vec<&str> = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["title"].as_str().unwrap())
            .collect();
        assert_eq!(listed, titles, "{what}: the list");
        assert_eq!(list["meta"]["total"], titles.len(), "{what}: the total");
        let (status, book, _) = client.get(&kept_path, None).await;
        assert_eq!(
            (status, &book["title"]),
            (200, &Value::from("Kept")),
            "{what}"
        );
        let (status, book, _) = client.get(&lost_path, None).await;
        assert!(
            status == 404 || book["title"] != "Lost",
            "{what}: the lost book is gone ({status} {book})"
        );
    };
    store
        .outside(OutsideWrite::Restore {
            name: "backup".into(),
        })
        .await;
    shows("restored", &["Kept"]).await;
    for path in [kept_path.as_str(), lost_path.as_str(), "/api/books"] {
        client.warm(path).await;
    }
    store
        .outside(OutsideWrite::AddBook {
            title: "After".into(),
            author_id: ann,
            year: 2020,
        })
        .await;
    shows("restored, then written", &["Kept", "After"]).await;
}

/// Waits (up to 5 s) until the version the store knows without asking, if it knows one,
/// is the one it reads.
pub(super) async fn caught_up(store: &impl Versions) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let current = version(store).await;
    while store.known_version().is_some_and(|known| known != current)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

async fn tallied(store: &impl VersionTally, above: i64) -> BooksTally {
    let (version, tally) = store.tallied_version(above).await.expect("tally");
    assert_eq!(version, self::version(store).await, "the version with it");
    assert_eq!(tally.above, above, "the id asked about");
    tally
}

/// The tally tells creates from every other write of the store's: after creates alone
/// the new reading is "only appended" to the old one; after an update, a delete or any
/// author write it is not.
pub async fn version_tally_tells_creates_from_other_writes<S: TestStore + VersionTally>(
    store: Fixture<S>,
) {
    let id = author(&store, "A").await;
    let empty = tallied(&*store, i64::MAX).await;
    assert_eq!((empty.total, empty.max_id, empty.count_above), (0, 0, 0));
    let first = create(&store, "T", id).await;
    let second = create(&store, "U", id).await;
    let after = tallied(&*store, empty.max_id).await;
    assert_eq!((after.total, after.max_id), (2, second));
    assert_eq!(after.count_above, 2, "books above {}", empty.max_id);
    assert!(
        after.only_appended_since(&empty),
        "creates: {after:?} after {empty:?}"
    );
    create(&store, "V", id).await;
    let mut last = tallied(&*store, after.max_id).await;
    assert!(last.only_appended_since(&after), "a third create");
    assert_eq!(last.count_above, 1);

    let mut other_write = async |what: &str| {
        let now = tallied(&*store, last.max_id).await;
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
    other_write("update").await;
    let other = author(&store, "B").await;
    other_write("add an author").await;
    assert!(store.remove_author(other).await.unwrap());
    other_write("remove an author").await;
    assert!(store.delete(second).await.unwrap());
    other_write("delete").await;
}

/// The tally from outside: an insert the store did not make is "only appended"; any
/// other write from outside is not.
pub async fn version_tally_tells_creates_from_writes_from_outside<S: TestStore + VersionTally>(
    store: Fixture<S>,
) {
    let id = author(&store, "A").await;
    let book = create(&store, "T", id).await;
    let mut last = tallied(&*store, i64::MAX).await;
    for write in outside_writes(book, id) {
        let append = matches!(write, OutsideWrite::AddBook { .. });
        let what = format!("{write:?} from outside");
        store.outside(write).await;
        let now = tallied(&*store, last.max_id).await;
        assert_eq!(
            now.only_appended_since(&last),
            append,
            "{what}: {now:?} after {last:?}"
        );
        last = now;
    }
}
