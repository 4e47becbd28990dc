//! The entries' invariants (the cache module's 2, 3, 4, 6 and 7).

use super::*;

const KEY: Key = Key::Book {
    id: 1,
    author: false,
    xml: false,
};

fn entries() -> Entries {
    Entries::new(CacheLimits::default())
}

fn rendered(body: &'static str) -> Rendered {
    Rendered {
        answer: Response::new(Bytes::from_static(body.as_bytes())),
        count: None,
        rows: None,
    }
}

fn hit(found: Found) -> Option<Bytes> {
    match found {
        Found::Hit(hit) => Some(hit.into_body()),
        _ => None,
    }
}

fn reading(count: u64, tally: Option<BooksTally>) -> Reading {
    Reading {
        version: Version::new(1, count),
        tally,
    }
}

/// Invariant 3: a read that started before this process wrote keeps nothing, even at
/// a version the cache would serve (a pushed version may not know of the write yet).
#[test]
fn a_read_older_than_our_write_keeps_nothing() {
    let mut entries = entries();
    let before = entries.mark();
    entries.wrote();
    entries.put(KEY, 7, before, &rendered("old"));
    assert!(!entries.holds(&KEY));
    assert!(hit(entries.find(&KEY, 7, &HeaderMap::new())).is_none());

    let after = entries.mark();
    entries.put(KEY, 8, after, &rendered("new"));
    let body = hit(entries.find(&KEY, 8, &HeaderMap::new())).expect("kept");
    assert_eq!(body.as_ref(), b"new");
    assert!(
        hit(entries.find(&KEY, 7, &HeaderMap::new())).is_none(),
        "an older version never hits"
    );
}

/// Invariant 4: after a write of this process, the version the store knows is not
/// trusted until a check (or a read that started after the write) confirms the
/// entries'.
#[test]
fn a_known_version_is_trusted_again_only_after_our_write_is_seen() {
    let mut entries = entries();
    let mark = entries.mark();
    entries.put(KEY, 3, mark, &rendered("kept"));
    let known = |count| Some(Version::new(1, count));
    assert_eq!(entries.trusted(known(3)), None, "until a check read it");
    entries.checked(reading(3, None), mark);
    assert_eq!(entries.trusted(known(3)), Some(3));
    assert_eq!(
        entries.trusted(Some(Version::new(2, 3))),
        None,
        "another history"
    );
    entries.wrote();
    assert_eq!(entries.trusted(known(3)), None, "maybe not pushed yet");
    entries.checked(reading(4, None), mark);
    assert_eq!(entries.trusted(known(4)), None, "a check sent before it");
    let mark = entries.mark();
    entries.checked(reading(4, None), mark);
    assert_eq!(entries.trusted(known(4)), Some(4));
}

fn tally(changes: u64, total: u64, max_id: i64, above: i64, count_above: u64) -> BooksTally {
    BooksTally {
        changes,
        total,
        max_id,
        above,
        count_above,
    }
}

fn page(ids: std::ops::RangeInclusive<i64>, full: bool, total: u64) -> Rendered {
    let books = ids
        .map(|id| crate::store::BookRecord {
            id,
            title: "t".into(),
            year: 2020,
            author_id: None,
            author_name: None,
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
        })
        .collect();
    Rendered {
        rows: Some(Arc::new(PageRows { books, full, total })),
        ..rendered("page")
    }
}

fn list(page: u64) -> Key {
    Key::List {
        page,
        author: false,
        action: false,
        xml: false,
        query: None,
    }
}

/// Invariant 6: only appends above the old greatest id keep books and full pages
/// (whose rows come back to be rendered under the new total); anything else drops
/// every answer. Compressed bodies stay whatever happens.
#[test]
fn appends_keep_books_and_full_pages() {
    let mut entries = entries();
    entries.checked_now(reading(10, Some(tally(5, 25, 25, i64::MAX, 0))));
    let mark = entries.mark();
    entries.put(KEY, 10, mark, &rendered("book"));
    entries.put(list(1), 10, mark, &page(1..=20, true, 25));
    entries.put(list(2), 10, mark, &page(21..=25, false, 25));
    let tag = HeaderValue::from_static("\"t\"");
    entries.keep_encoded(tag.clone(), "gzip", Bytes::from_static(b"zz"));

    // Two books added above 25, nothing else.
    entries.checked_now(reading(12, Some(tally(5, 27, 27, 25, 2))));
    assert!(hit(entries.find(&KEY, 12, &HeaderMap::new())).is_some());
    match entries.find(&list(1), 12, &HeaderMap::new()) {
        Found::Rows(rows, total, _) => assert_eq!((rows.books.len(), total), (20, 27)),
        _ => panic!("page 1's rows, to render under 27"),
    }
    assert!(matches!(
        entries.find(&list(2), 12, &HeaderMap::new()),
        Found::Miss
    ));

    // A book added below the old greatest id (a host's explicit id): not appends.
    entries.checked_now(reading(13, Some(tally(5, 28, 27, 27, 0))));
    assert!(matches!(
        entries.find(&KEY, 13, &HeaderMap::new()),
        Found::Miss
    ));
    assert!(matches!(
        entries.find(&list(1), 13, &HeaderMap::new()),
        Found::Miss
    ));

    // Any other write moves `changes`.
    entries.put(KEY, 13, mark, &rendered("book"));
    entries.checked_now(reading(14, Some(tally(6, 28, 27, 27, 0))));
    assert!(matches!(
        entries.find(&KEY, 14, &HeaderMap::new()),
        Found::Miss
    ));
    assert!(entries.encoded(&tag, "gzip").is_some(), "never stale");
}

/// A kept page rendered again under the standing's new total is kept, whatever this
/// process wrote since (nothing in it was read) but only at the standing it was found
/// at, and it confirms nothing: after a write, the known version is still not trusted.
#[test]
fn a_page_renewed_under_a_new_total_is_kept_across_our_writes() {
    let mut entries = entries();
    entries.checked_now(reading(10, Some(tally(5, 25, 25, i64::MAX, 0))));
    let mark = entries.mark();
    entries.put(list(1), 10, mark, &page(1..=20, true, 25));
    entries.checked_now(reading(12, Some(tally(5, 27, 27, 25, 2))));
    let renewal = |entries: &Entries| match entries.find(&list(1), 12, &HeaderMap::new()) {
        Found::Rows(_, 27, learnt) => learnt,
        _ => panic!("page 1's rows, to render under 27"),
    };
    let learnt = renewal(&entries);
    entries.wrote();
    entries.renew(list(1), learnt, &page(1..=20, true, 27));
    assert!(
        hit(entries.find(&list(1), 12, &HeaderMap::new())).is_some(),
        "kept though this process wrote"
    );
    assert_eq!(
        entries.trusted(Some(Version::new(1, 12))),
        None,
        "not confirmed"
    );

    // Found before the standing moved, rendered after: not kept.
    entries.checked_now(reading(14, Some(tally(5, 29, 29, 27, 2))));
    let learnt = renewal_at(&entries, 14);
    entries.checked_now(reading(15, Some(tally(5, 30, 30, 29, 1))));
    entries.renew(list(1), learnt, &page(1..=20, true, 29));
    assert!(hit(entries.find(&list(1), 15, &HeaderMap::new())).is_none());
}

fn renewal_at(entries: &Entries, count: u64) -> u64 {
    match entries.find(&list(1), count, &HeaderMap::new()) {
        Found::Rows(_, _, learnt) => learnt,
        _ => panic!("page 1's rows"),
    }
}

/// Invariant 7: rendered answers and compressed bodies share one budget.
#[test]
fn answers_and_compressed_bodies_share_one_bound() {
    let mut entries = Entries::new(CacheLimits {
        entries: 2,
        bytes: 1 << 20,
    });
    let mark = entries.mark();
    entries.put(KEY, 1, mark, &rendered("book"));
    entries.keep_encoded(HeaderValue::from_static("\"a\""), "br", Bytes::from("x"));
    entries.keep_encoded(HeaderValue::from_static("\"b\""), "br", Bytes::from("y"));
    let kept = usize::from(entries.holds(&KEY))
        + usize::from(
            entries
                .encoded(&HeaderValue::from_static("\"a\""), "br")
                .is_some(),
        )
        + usize::from(
            entries
                .encoded(&HeaderValue::from_static("\"b\""), "br")
                .is_some(),
        );
    assert_eq!(kept, 2, "two entries in all, not two of each");
}

impl Entries {
    /// A check sent now and answered at once.
    fn checked_now(&mut self, reading: Reading) -> Moved {
        let mark = self.mark();
        self.checked(reading, mark)
    }
}

/// Invariant 8: a check in another history than the last check's drops every answer,
/// whatever its count; so does a count below the standing the check was sent after.
#[test]
fn a_rewritten_history_drops_every_answer() {
    let mut entries = entries();
    assert_eq!(entries.checked_now(reading(10, None)), Moved::Ahead);
    let mark = entries.mark();
    entries.put(KEY, 10, mark, &rendered("book"));
    entries.put(list(1), 10, mark, &page(1..=20, true, 25));
    let tag = HeaderValue::from_static("\"t\"");
    entries.keep_encoded(tag.clone(), "gzip", Bytes::from_static(b"zz"));

    let other = Reading {
        version: Version::new(2, 10),
        tally: None,
    };
    assert!(
        matches!(
            entries.checked_now(other),
            Moved::Rewritten(Rewrite::History { .. })
        ),
        "another history"
    );
    assert!(!entries.holds(&KEY) && !entries.holds(&list(1)));
    assert!(
        entries.encoded(&tag, "gzip").is_some(),
        "named by their bytes"
    );

    let mark = entries.mark();
    entries.put(KEY, 10, mark, &rendered("book"));
    let back = Reading {
        version: Version::new(2, 7),
        tally: None,
    };
    assert_eq!(
        entries.checked_now(back),
        Moved::Rewritten(Rewrite::Backwards { was: 10 }),
        "a count going back"
    );
    assert!(!entries.holds(&KEY));
    assert!(hit(entries.find(&KEY, 10, &HeaderMap::new())).is_none());
}

/// A check sent before a read learnt a newer count, answered after it, is older data,
/// not a rewrite: nothing is dropped.
#[test]
fn a_check_older_than_a_later_read_drops_nothing() {
    let mut entries = entries();
    entries.checked_now(reading(5, None));
    let sent = entries.mark();
    let mark = entries.mark();
    entries.put(KEY, 9, mark, &rendered("newer"));
    assert_eq!(entries.checked(reading(6, None), sent), Moved::No);
    assert!(hit(entries.find(&KEY, 9, &HeaderMap::new())).is_some());
    assert_eq!(entries.checked_now(reading(9, None)), Moved::No);
    assert!(hit(entries.find(&KEY, 9, &HeaderMap::new())).is_some());
}
