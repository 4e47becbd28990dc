//! Reads through the API against writes the store did not make: the case that needs the
//! suite's outside-writes hook.

use super::*;
use crate::store::BookStore;
use crate::testing::InProcess;
use crate::testing::store_cases::{Outside, OutsideWrite};

/// Reads through the API follow writes the API did not make (another process, a host's
/// SQL: the suite's outside-writes hook): a book, a page, an author's name and a
/// conditional read, each answered before such a write, are never answered as before
/// after it. A store whose version lives in the process's memory serves its cached
/// answers on and fails.
pub async fn reads_follow_writes_from_outside<M, S>(make: &M, outside: &Outside<S>)
where
    M: MakeHarness<Harness = InProcess<S>>,
    S: BookStore + Clone + 'static,
{
    let app = start(make, |c| c).await;
    let author = app.author("Inside").await;
    let id = app.book(author, "Before").await;
    let book = format!("/api/books/{id}?include=author");
    let first = app.get(&book).await.expect(200);
    let etag = first.header("etag").expect("an ETag").to_owned();
    let total = app.total().await;
    // Twice each: the second answer is the one a cache would keep.
    app.get(&book).await.expect(200);
    app.total().await;

    let store = app.harness.store().clone();
    outside
        .write(
            store.clone(),
            OutsideWrite::Retitle {
                id,
                title: "After".into(),
            },
        )
        .await;
    let read = app.get(&book).await.expect(200).json();
    assert_eq!(read["title"], "After", "a book retitled from outside");
    let revalidated = app
        .send("GET", &book, &[("if-none-match", &etag)], "")
        .await;
    assert_eq!(
        revalidated.status, 200,
        "no 304 for the book before the write"
    );

    outside
        .write(
            store.clone(),
            OutsideWrite::AddBook {
                title: "Added outside".into(),
                author_id: author,
                year: 2020,
            },
        )
        .await;
    assert_eq!(
        app.total().await,
        total + 1,
        "a book added from outside counts"
    );

    outside
        .write(
            store,
            OutsideWrite::RenameAuthor {
                id: author,
                name: "Renamed outside".into(),
            },
        )
        .await;
    let read = app.get(&book).await.expect(200).json();
    assert_eq!(
        read["author"]["name"], "Renamed outside",
        "an author renamed from outside"
    );
}
