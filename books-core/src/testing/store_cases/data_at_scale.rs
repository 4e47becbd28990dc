//! The data tier under load: creates at once, sent together, and pages at every depth
//! while books are deleted between them.

use chrono::{DateTime, TimeDelta, Utc};

use super::*;
use crate::store::{BookRecord, StoreError};

/// 200 creates from 50 concurrent tasks: no error, 200 rows, no duplicate id.
pub async fn concurrent_creates_get_distinct_ids(store: Fixture<impl TestStore>) {
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
    let page = store.list(&query(0, 500)).await.unwrap();
    assert_eq!(page.total, 200);
    assert_eq!(page.books.len(), 200);
    assert_eq!(page.books.iter().map(|b| b.id).collect::<Vec<_>>(), ids);
}

/// 30 creates sent at once (a store may write them together): each gets its own book with
/// its own fields and timestamp, a missing author fails only its own create, and every id
/// is new; then 30 alike but for their times, less than a microsecond apart.
pub async fn creates_sent_together_each_get_their_own_book(store: Fixture<impl TestStore>) {
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
    assert_eq!(store.list(&query(0, 100)).await.unwrap().total, 27);
    // Alike but for times 300 ns apart (as `Utc::now()` gives them to callers at once):
    // each create succeeds, its time kept to the microsecond at least.
    let book = input("alike", named, 2000);
    let times: Vec<_> = (1..=30)
        .map(|n| at(1) + TimeDelta::nanoseconds(300 * n))
        .collect();
    let sent = times.iter().map(|now| store.create(&book, *now));
    for (now, result) in times.iter().zip(futures_util::future::join_all(sent).await) {
        let record = result.expect("an alike create");
        assert!(
            (record.created_at - *now).abs() < TimeDelta::microseconds(1),
            "{now}"
        );
        ids.push(record.id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 56, "distinct ids");
}

/// Pages at every kind of offset (inside the first 1,024 ids, at and across range
/// boundaries, the last book, past the end) match a walk through the ids, before and
/// after deletes in the middle and at both ends, and while deletes happen between pages.
pub async fn deep_pages_stay_exact_across_ranges(store: Fixture<impl TestStore>) {
    async fn check(store: &impl TestStore, ids: &[i64], offsets: &[usize]) {
        for &offset in offsets {
            let page = store.list(&query(offset as u64, 20)).await.unwrap();
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
    check(&*store, &ids, &offsets(ids.len())).await;

    let middle: Vec<i64> = ids[1010..1030].to_vec();
    let ends = [ids[0], ids[1], ids[ids.len() - 1], ids[ids.len() - 2]];
    for victim in middle.iter().chain(&ends) {
        assert!(store.delete(*victim).await.unwrap());
        ids.retain(|id| id != victim);
    }
    check(&*store, &ids, &offsets(ids.len())).await;

    let mut offset = 0;
    while offset < ids.len() {
        check(&*store, &ids, &[offset]).await;
        for victim in [ids.get(offset + 500).copied(), ids.get(offset / 2).copied()]
            .into_iter()
            .flatten()
        {
            assert!(store.delete(victim).await.unwrap());
            ids.retain(|&id| id != victim);
        }
        offset += 250;
    }
    check(&*store, &ids, &offsets(ids.len())).await;
}
