//! The list queries tier: [`ListQuery`]'s filter and sort, as [`ListQueries`] promises
//! them.

use http::Request;
use serde_json::Value;

use super::*;
use crate::store::{BookRecord, ListFilter, ListQueries, SortField, SortKey, YearRange};
use crate::{BooksApi, Config};

/// A small catalogue (titles chosen for the title rules: ASCII case, characters other
/// than ASCII letters, LIKE's wildcards as plain characters) and its authors' ids.
async fn catalogue<S: TestStore>(store: &Fixture<S>) -> (i64, i64, i64) {
    let (ann, bob, cy) = (
        author(store, "Ann").await,
        author(store, "Bob").await,
        author(store, "Cy").await,
    );
    for (day, title, author, year) in [
        (1, "Dune", ann, 2015),
        (2, "Dune Messiah", ann, 2017),
        (3, "children of dune", bob, 2015),
        (4, "Élan", bob, 2020),
        (5, "élan vital", cy, 2001),
        (6, "100% Pure_Dune\\", cy, 2024),
        (7, "apple", ann, 2010),
        (8, "Banana", bob, 2010),
        (9, "Zebra", cy, 2019),
    ] {
        store
            .create(&input(title, author, year), at(day))
            .await
            .expect("create");
    }
    (ann, bob, cy)
}

fn filtered(filter: ListFilter) -> ListQuery {
    query(0, 50).with_filter(filter)
}

fn sorted(keys: &[(SortField, bool)]) -> ListQuery {
    query(0, 50).with_sort(
        keys.iter()
            .map(|&(field, descending)| SortKey { field, descending })
            .collect(),
    )
}

async fn listed(store: &impl BookStore, query: &ListQuery) -> (Vec<String>, u64) {
    let page = store.list(query).await.expect("list");
    (
        page.books.into_iter().map(|b| b.title).collect(),
        page.total,
    )
}

fn owned(titles: &[&str]) -> Vec<String> {
    titles.iter().map(|t| (*t).to_owned()).collect()
}

/// Each filter keeps what the contract says, combined with AND, several values with OR;
/// the total counts the books kept.
pub async fn list_queries_filter_by_author_year_and_title(
    store: Fixture<impl TestStore + ListQueries>,
) {
    let (ann, bob, cy) = catalogue(&store).await;
    let by = |author_ids: Vec<i64>, years: Vec<YearRange>, title: Option<&str>| ListFilter {
        author_ids,
        years,
        title: title.map(Into::into),
    };
    let cases = [
        (
            by(vec![ann], vec![], None),
            &["Dune", "Dune Messiah", "apple"][..],
        ),
        (
            by(vec![bob, cy], vec![YearRange::year(2010)], None),
            &["Banana"],
        ),
        (
            by(
                vec![],
                vec![YearRange::year(2015), YearRange::year(2024)],
                None,
            ),
            &["Dune", "children of dune", "100% Pure_Dune\\"],
        ),
        (
            by(
                vec![],
                vec![YearRange {
                    from: Some(2017),
                    to: Some(2020),
                }],
                None,
            ),
            &["Dune Messiah", "Élan", "Zebra"],
        ),
        (
            by(
                vec![],
                vec![YearRange {
                    from: None,
                    to: Some(2010),
                }],
                None,
            ),
            &["élan vital", "apple", "Banana"],
        ),
        (
            by(vec![], vec![], Some("dUNE")),
            &[
                "Dune",
                "Dune Messiah",
                "children of dune",
                "100% Pure_Dune\\",
            ],
        ),
        (by(vec![], vec![], Some("Élan")), &["Élan"]),
        (by(vec![], vec![], Some("élan")), &["élan vital"]),
        (by(vec![], vec![], Some("LAN")), &["Élan", "élan vital"]),
        (by(vec![], vec![], Some("%")), &["100% Pure_Dune\\"]),
        (by(vec![], vec![], Some("_")), &["100% Pure_Dune\\"]),
        (by(vec![], vec![], Some("\\")), &["100% Pure_Dune\\"]),
        (by(vec![], vec![], Some("dun_")), &[]),
        (by(vec![], vec![], Some("D%e")), &[]),
        (
            by(vec![ann, cy], vec![YearRange::year(2015)], Some("dune")),
            &["Dune"],
        ),
        (by(vec![ann + bob + cy], vec![], None), &[]),
    ];
    for (filter, want) in cases {
        let got = listed(&*store, &filtered(filter.clone())).await;
        assert_eq!(got, (owned(want), want.len() as u64), "{filter:?}");
    }
    // Pages of a filtered list, and an offset past its end.
    let dune = by(vec![], vec![], Some("dune"));
    let second = query(2, 2).with_filter(dune.clone());
    assert_eq!(
        listed(&*store, &second).await,
        (owned(&["children of dune", "100% Pure_Dune\\"]), 4)
    );
    let beyond = query(10, 2).with_filter(dune);
    assert_eq!(listed(&*store, &beyond).await, (vec![], 4));
}

/// Sorts by each field, either way, and by several keys; ties by id ascending; titles
/// as the title filter compares them (ASCII letters case-insensitively, then by code
/// point, so `É` after `z`).
pub async fn list_queries_sort_by_every_field_with_ties_by_id(
    store: Fixture<impl TestStore + ListQueries>,
) {
    catalogue(&store).await;
    use SortField::*;
    type Case = (&'static [(SortField, bool)], &'static [&'static str]);
    let cases: [Case; 6] = [
        (
            &[(Title, false)],
            &[
                "100% Pure_Dune\\",
                "apple",
                "Banana",
                "children of dune",
                "Dune",
                "Dune Messiah",
                "Zebra",
                "Élan",
                "élan vital",
            ],
        ),
        (
            &[(Year, true)],
            &[
                "100% Pure_Dune\\",
                "Élan",
                "Zebra",
                "Dune Messiah",
                "Dune",
                "children of dune",
                "apple",
                "Banana",
                "élan vital",
            ],
        ),
        (
            &[(Year, false), (Title, true)],
            &[
                "élan vital",
                "Banana",
                "apple",
                "Dune",
                "children of dune",
                "Dune Messiah",
                "Zebra",
                "Élan",
                "100% Pure_Dune\\",
            ],
        ),
        (
            &[(CreatedAt, true)],
            &[
                "Zebra",
                "Banana",
                "apple",
                "100% Pure_Dune\\",
                "élan vital",
                "Élan",
                "children of dune",
                "Dune Messiah",
                "Dune",
            ],
        ),
        (
            &[(Id, true)],
            &[
                "Zebra",
                "Banana",
                "apple",
                "100% Pure_Dune\\",
                "élan vital",
                "Élan",
                "children of dune",
                "Dune Messiah",
                "Dune",
            ],
        ),
        (
            &[(Title, true)],
            &[
                "élan vital",
                "Élan",
                "Zebra",
                "Dune Messiah",
                "Dune",
                "children of dune",
                "Banana",
                "apple",
                "100% Pure_Dune\\",
            ],
        ),
    ];
    for (keys, want) in cases {
        let got = listed(&*store, &sorted(keys)).await;
        assert_eq!(got, (owned(want), 9), "{keys:?}");
    }
    // `updated_at`: an update moves a book to the end, ties by id.
    let first = store.list(&query(0, 1)).await.unwrap().books[0].clone();
    let author = first.author_id.unwrap();
    store
        .update(first.id, &input("Dune", author, 2015), at(20))
        .await
        .unwrap();
    let (titles, _) = listed(&*store, &sorted(&[(UpdatedAt, false)])).await;
    assert_eq!(titles.last().map(String::as_str), Some("Dune"));
    assert_eq!(titles[0], "Dune Messiah");
    // Pages of a sorted list follow each other with nothing lost or repeated.
    let all = listed(&*store, &sorted(&[(Year, true), (Title, false)]))
        .await
        .0;
    let mut paged = Vec::new();
    for offset in (0..10).step_by(4) {
        let page = query(offset, 4).with_sort(sorted(&[(Year, true), (Title, false)]).sort);
        paged.extend(listed(&*store, &page).await.0);
    }
    assert_eq!(paged, all);
}

/// A filtered, sorted page through the API (its cache on) after creates by the store:
/// each read shows them, and its `ETag` moves with its bytes.
pub async fn list_queries_stay_exact_across_writes(store: Fixture<impl TestStore + ListQueries>) {
    let (ann, bob, _) = catalogue(&store).await;
    let path = dune_by(ann, bob);
    let api = BooksApi::new(store.store(), Config::default());
    let (titles, total, tag) = dunes(&store, &api, &path).await;
    assert_eq!(
        (titles, total),
        (owned(&["Dune Messiah", "Dune", "children of dune"]), 3)
    );
    assert_eq!(
        dunes(&store, &api, &path).await.2,
        tag,
        "a repeated read, the same bytes"
    );
    store
        .create(&input("Dune Encyclopedia", bob, 2019), at(11))
        .await
        .unwrap();
    let (titles, total, moved) = dunes(&store, &api, &path).await;
    assert_eq!(
        (titles, total),
        (
            owned(&[
                "Dune Messiah",
                "Dune Encyclopedia",
                "Dune",
                "children of dune"
            ]),
            4
        ),
        "a create through the store"
    );
    assert_ne!(moved, tag);
}

/// The same from outside the store: an insert by a host's SQL shows in the next read.
pub async fn list_queries_stay_exact_across_writes_from_outside(
    store: Fixture<impl TestStore + ListQueries>,
) {
    let (ann, bob, _) = catalogue(&store).await;
    let path = dune_by(ann, bob);
    let api = BooksApi::new(store.store(), Config::default());
    let (_, total, tag) = dunes(&store, &api, &path).await;
    assert_eq!(total, 3);
    store
        .outside(OutsideWrite::AddBook {
            title: "Dune (1984)".into(),
            author_id: ann,
            year: 2020,
        })
        .await;
    let (titles, total, moved) = dunes(&store, &api, &path).await;
    assert_eq!(total, 4, "an insert from outside");
    assert_eq!(titles[1], "Dune (1984)", "{titles:?}");
    assert_ne!(moved, tag);
}

/// A filter's total asked again, on every page of it, and after each kind of write: the
/// count of what the filter keeps then, whatever a store remembers between reads (the
/// SQL stores keep a filter's last count while the version holds). A backup restored
/// takes the version back, and a write after it brings it to where it was with other
/// books: seen by another read first, or by the filter's own.
pub async fn filtered_totals_follow_every_write(store: Fixture<impl TestStore + ListQueries>) {
    let (ann, bob, _) = catalogue(&store).await;
    let year = |from: usize| {
        ListQuery::new(from as u64, 1).with_filter(ListFilter {
            author_ids: vec![],
            years: vec![YearRange::year(2015)],
            title: None,
        })
    };
    let totals = async |what: &str, expected: u64| {
        for (page, books) in [(0, 1), (0, 1), (expected as usize - 1, 1), (50, 0)] {
            let (titles, total) = listed(&*store, &year(page)).await;
            assert_eq!(
                (titles.len(), total),
                (books, expected),
                "{what}: the page from {page}"
            );
        }
    };
    totals("at first", 2).await;
    let added = store
        .create(&input("Dune 2015", bob, 2015), at(11))
        .await
        .unwrap();
    totals("a create", 3).await;
    store
        .update(added.id, &input("Dune 2016", bob, 2016), at(12))
        .await
        .unwrap();
    totals("an update out of the filter", 2).await;
    let add = |title: &str| OutsideWrite::AddBook {
        title: title.into(),
        author_id: ann,
        year: 2015,
    };
    let snapshot = |name: &str| OutsideWrite::Snapshot { name: name.into() };
    let restore = |name: &str| OutsideWrite::Restore { name: name.into() };
    let retitle = |title: &str| OutsideWrite::Retitle {
        id: added.id,
        title: title.into(),
    };
    store.outside(add("Outside")).await;
    totals("an insert from outside", 3).await;
    let every = listed(&*store, &query(0, 50)).await;
    store.outside(snapshot("totals")).await;
    store.outside(add("Lost")).await;
    totals("before the restore", 4).await;
    store.outside(restore("totals")).await;
    // Another read sees the version go back; the filter is not read at it.
    assert_eq!(listed(&*store, &query(0, 50)).await, every, "restored");
    store.outside(retitle("Dune 2016, retitled")).await;
    totals("restored, then written", 3).await;
    // A total kept below the highest version read, a backup restored under it and a
    // write that brings the version back to the kept total's: the filter, read first,
    // counts.
    store.outside(snapshot("kept")).await;
    store.outside(add("Lost again")).await;
    totals("before the second restore", 4).await;
    store.outside(retitle("Dune 2016, again")).await;
    let past = listed(&*store, &query(0, 50)).await.1;
    assert_eq!(past, every.1 + 1, "a read past the kept total");
    store.outside(restore("kept")).await;
    store.outside(retitle("Dune 2016, once more")).await;
    totals("restored under a kept total, then written", 3).await;
}

/// Every page of a filter in id order, one and two books long, each asked twice, holds
/// what the whole list holds at its offset, after each kind of write. A SQL store reads
/// a page of a filter of few books from the ids it kept at the version, or starts it
/// from where one at the same version began or ended. After each write but the insert
/// (whose id is above every other) the first page asked is one that such ids or such a
/// start, kept from before the write, would get wrong; after the first write, also one of
/// another filter that keeps the same books (the same year twice), asked once before it.
pub async fn filtered_pages_follow_every_write(store: Fixture<impl TestStore + ListQueries>) {
    let (ann, bob, _) = catalogue(&store).await;
    for day in 11..15 {
        store
            .create(&input(&format!("Day {day}"), bob, 2015), at(day))
            .await
            .unwrap();
    }
    let query = |times: usize, offset: usize, limit: u32| {
        ListQuery::new(offset as u64, limit).with_filter(ListFilter {
            author_ids: vec![],
            years: vec![YearRange::year(2015); times],
            title: None,
        })
    };
    // The filter's books by id, read through the unfiltered list.
    let kept = async || -> Vec<BookRecord> {
        let every = store.list(&query(0, 0, 50)).await.expect("list").books;
        every.into_iter().filter(|b| b.year == 2015).collect()
    };
    let asked = async |what: &str, times: usize, offset: usize, limit: u32| {
        let books = kept().await;
        let expected = books.iter().skip(offset).take(limit as usize);
        let expected = expected.map(|b| b.title.clone()).collect();
        let read = listed(&*store, &query(times, offset, limit)).await;
        assert_eq!(
            read,
            (expected, books.len() as u64),
            "{what}: {limit} from {offset}, the year {times} times"
        );
    };
    let page = async |what: &str, offset: usize, limit: u32| asked(what, 1, offset, limit).await;
    let pages = async |what: &str| {
        let last = kept().await.len() + 1;
        for (limit, offset) in [1, 2]
            .into_iter()
            .flat_map(|l| (0..=last).map(move |o| (l, o)))
        {
            page(what, offset, limit).await;
            page(what, offset, limit).await;
        }
        // The other filter's first page, once: its start at the next book is kept.
        asked(what, 2, 0, 1).await;
    };
    pages("at first").await;
    let first = kept().await[0].id;
    store.delete(first).await.unwrap();
    page("the first deleted", 0, 1).await;
    asked("the first deleted", 2, 1, 1).await;
    pages("the first deleted").await;
    let third = kept().await[2].clone();
    store
        .update(third.id, &input(&third.title, bob, 2016), at(20))
        .await
        .unwrap();
    page("the third moved out", 3, 1).await;
    pages("the third moved out").await;
    let second = kept().await[1].id;
    store.outside(OutsideWrite::DeleteBook { id: second }).await;
    page("the second deleted from outside", 2, 2).await;
    pages("the second deleted from outside").await;
    store
        .outside(OutsideWrite::AddBook {
            title: "Outside".into(),
            author_id: ann,
            year: 2015,
        })
        .await;
    page("an insert from outside", 3, 1).await;
    pages("an insert from outside").await;
}

/// A filtered page and its total come from one snapshot while a writer outside the
/// store adds and removes matching books beside the reads (rule 2).
pub async fn filtered_pages_and_totals_come_from_one_snapshot(
    store: Fixture<impl TestStore + ListQueries>,
) {
    let (ann, _, _) = catalogue(&store).await;
    let query = ListQuery::new(0, 10_000).with_filter(ListFilter {
        author_ids: vec![ann],
        years: vec![],
        title: None,
    });
    super::data::one_snapshot_under_outside_writes(&store, ann, &query).await;
}

/// `filter[title]=dune` and two authors, sorted by title descending.
fn dune_by(ann: i64, bob: i64) -> String {
    format!("/api/books?filter%5Btitle%5D=dune&filter[author_id]={ann},{bob}&sort=-title")
}

/// The titles, total and `ETag` of `path` through `api`, once the store settled.
async fn dunes<S: TestStore>(
    store: &Fixture<S>,
    api: &BooksApi,
    path: &str,
) -> (Vec<String>, u64, String) {
    store.settle().await;
    let request = Request::get(path).body(String::new()).unwrap();
    let response = api.handle(request).await;
    assert_eq!(response.status(), 200);
    let tag = response.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = serde_json::from_slice(response.body()).unwrap();
    let titles = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["title"].as_str().unwrap().to_owned())
        .collect();
    (titles, body["meta"]["total"].as_u64().unwrap(), tag)
}
