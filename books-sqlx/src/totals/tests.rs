use super::*;

fn filter(year: i32) -> (String, i32) {
    ("b.year = $3".to_owned(), year)
}

fn counted(version: i64, origin: i64, total: i64) -> Counted {
    Counted {
        version,
        origin,
        total,
    }
}

/// What the store answers for the filter of `year` read at `version` (origin 1),
/// its statement counting `total` unless sent with a kept total of that version, and
/// sent again to count when the kept one is refused, as `queries::list` does.
fn read(totals: &Totals<(String, i32)>, year: i32, version: i64, total: i64) -> Option<i64> {
    let known = totals.known(&filter(year), None);
    let kept = known
        .counted
        .is_some_and(|k| k.version == version && k.origin == 1);
    let answered = if kept { UNCHANGED } else { total };
    let settled = totals.settle(&filter(year), &known, counted(version, 1, answered));
    settled.or_else(|| {
        let counting = totals.known(&filter(year), None).counting();
        totals.settle(&filter(year), &counting, counted(version, 1, total))
    })
}

#[test]
fn a_count_is_kept_and_given_back_at_its_version_and_origin_only() {
    let totals = Totals::default();
    let known = totals.known(&filter(2010), None);
    assert_eq!(
        totals.settle(&filter(2010), &known, counted(7, 1, 38)),
        Some(38)
    );
    let known = totals.known(&filter(2010), None);
    assert_eq!(known.counted, Some(counted(7, 1, 38)));
    assert_eq!(totals.known(&filter(2011), None).counted, None);
    // The statement found the version and origin unchanged.
    let unchanged = |version, origin| counted(version, origin, UNCHANGED);
    assert_eq!(
        totals.settle(&filter(2010), &known, unchanged(7, 1)),
        Some(38)
    );
    // An answer of "unchanged" at another version or origin is not taken.
    assert_eq!(totals.settle(&filter(2010), &known, unchanged(7, 2)), None);
    assert_eq!(totals.settle(&filter(2010), &known, unchanged(8, 1)), None);
    let nothing = totals.known(&filter(2011), None);
    assert_eq!(
        totals.settle(&filter(2011), &nothing, unchanged(8, 1)),
        None
    );
    // A new count replaces the old.
    assert_eq!(
        totals.settle(&filter(2010), &known, counted(9, 1, 39)),
        Some(39)
    );
    assert_eq!(
        totals.known(&filter(2010), None).counted,
        Some(counted(9, 1, 39))
    );
}

#[test]
fn a_count_that_went_backwards_forgets_every_total() {
    let totals = Totals::default();
    assert_eq!(read(&totals, 2010, 50, 38), Some(38));
    assert_eq!(read(&totals, 2010, 50, 0), Some(38), "kept");
    totals.seen(100);
    // A backup restored to 40, then writes back to 50: the first read of the filter
    // sees 50 below 100 and counts.
    assert_eq!(read(&totals, 2010, 50, 41), Some(41));
    assert_eq!(read(&totals, 2010, 50, 0), Some(41), "kept again");
}

#[test]
fn a_count_sent_before_the_store_forgot_is_not_kept() {
    let totals = Totals::default();
    totals.seen(10);
    let before = totals.known(&filter(2010), None);
    totals.seen(5);
    // Sent before the restore, answered after: given, not kept.
    assert_eq!(
        totals.settle(&filter(2010), &before, counted(10, 1, 38)),
        Some(38)
    );
    assert_eq!(totals.known(&filter(2010), None).counted, None);
}

#[test]
fn past_its_bound_the_store_forgets_and_counts_again() {
    let totals = Totals::default();
    for year in 0..KEPT as i32 {
        assert_eq!(read(&totals, year, 1, 1), Some(1));
    }
    assert_eq!(read(&totals, 0, 2, 2), Some(2));
    assert!(totals.known(&filter(1), None).counted.is_some());
    assert_eq!(read(&totals, -1, 2, 1), Some(1));
    assert_eq!(totals.known(&filter(1), None).counted, None);
    assert!(totals.known(&filter(-1), None).counted.is_some());
}

#[test]
fn a_page_starts_from_the_nearest_mark_of_its_totals_version() {
    let totals = Totals::default();
    assert_eq!(read(&totals, 2010, 7, 38), Some(38));
    let at = |version| counted(version, 1, 38);
    // Page 3 of 10 (offset 20) held ids 40..=49.
    let known = totals.known(&filter(2010), None);
    totals.mark(
        &filter(2010),
        &known,
        at(7),
        Mark::of_page(20, &[40, 45, 49]),
    );
    let seek = |offset| totals.known(&filter(2010), Some((offset, 10))).seek;
    assert_eq!(seek(20), Some(Mark { before: 20, id: 40 }));
    assert_eq!(seek(23), Some(Mark { before: 23, id: 50 }));
    assert_eq!(seek(90), Some(Mark { before: 23, id: 50 }));
    assert_eq!(seek(19), None, "no mark below it");
    assert_eq!(totals.known(&filter(2010), None).seek, None);
    // Marks of another version are not kept, and a new count drops the old ones.
    totals.mark(&filter(2010), &known, at(8), Mark::of_page(60, &[90]));
    assert_eq!(seek(90), Some(Mark { before: 23, id: 50 }));
    assert_eq!(read(&totals, 2010, 8, 39), Some(39));
    assert_eq!(seek(90), None);
    assert_eq!(
        totals.known(&filter(2010), Some((90, 10))).counting().seek,
        None
    );
    // Past its bound, the oldest goes.
    let known = totals.known(&filter(2010), None);
    for page in 0..=MARKS as u64 {
        let marks = Mark::of_page(page * 10 + 10, &[page as i64]);
        totals.mark(&filter(2010), &known, at(8), marks);
    }
    assert_eq!(seek(10), None);
    assert_eq!(seek(90), Some(Mark { before: 90, id: 8 }));
    // Nor those read before the store forgot its totals.
    assert_eq!(read(&totals, 2010, 9, 40), Some(40));
    let before = totals.known(&filter(2010), None);
    totals.seen(1);
    assert_eq!(read(&totals, 2010, 9, 40), Some(40));
    totals.mark(&filter(2010), &before, at(9), Mark::of_page(20, &[40]));
    assert_eq!(seek(30), None);
    // A first page's first book skips nothing.
    assert_eq!(Mark::of_page(0, &[5, 7]), [Mark { before: 2, id: 8 }]);
}

#[test]
fn a_filter_of_few_books_has_its_ids_kept_at_its_version() {
    let totals = Totals::default();
    let page = |offset| Some((offset, 2));
    assert!(!totals.known(&filter(2010), page(0)).listable, "no total");
    assert_eq!(read(&totals, 2010, 7, 3), Some(3));
    let known = totals.known(&filter(2010), page(0));
    assert!(known.listable && known.listed.is_none());
    assert!(
        !totals.known(&filter(2010), None).listable,
        "not in id order"
    );
    // Read at the kept version: kept, and pages are their slices.
    totals.list(&filter(2010), &known, (7, 1), vec![4, 9, 12]);
    let listed = |offset| totals.known(&filter(2010), page(offset)).listed;
    assert_eq!(listed(0), Some(vec![4, 9]));
    assert_eq!(listed(2), Some(vec![12]));
    assert_eq!(listed(5), Some(vec![]), "past the last book");
    assert!(!totals.known(&filter(2010), page(0)).listable);
    assert_eq!(totals.known(&filter(2010), page(0)).counting().listed, None);
    // A count at the same version keeps them; at another, drops them.
    assert_eq!(read(&totals, 2010, 7, 3), Some(3));
    assert_eq!(listed(2), Some(vec![12]));
    assert_eq!(read(&totals, 2010, 8, 2), Some(2));
    assert_eq!(listed(0), None);
    // Read at a newer version, they are its total.
    let known = totals.known(&filter(2010), page(0));
    totals.list(&filter(2010), &known, (9, 1), vec![4, 12]);
    assert_eq!(
        totals.known(&filter(2010), None).counted,
        Some(counted(9, 1, 2))
    );
    assert_eq!(listed(0), Some(vec![4, 12]));
    // Nor too many, nor read before the store forgot its totals.
    let known = totals.known(&filter(2011), page(0));
    totals.list(&filter(2011), &known, (9, 1), vec![1; LISTED + 1]);
    assert_eq!(totals.known(&filter(2011), page(0)).listed, None);
    totals.seen(1);
    totals.list(&filter(2010), &known, (9, 1), vec![4]);
    assert_eq!(listed(0), None);
    // Past the bound over every filter, the store drops every filter's ids, and reads
    // them again at their next versions only.
    let known = totals.known(&filter(0), None);
    let every = LISTED_IN_ALL / LISTED;
    for year in 0..every as i32 {
        totals.list(&filter(year), &known, (9, 1), vec![1; LISTED]);
    }
    // A filter's ids read again replace its own.
    totals.list(&filter(1), &known, (9, 1), vec![2; LISTED]);
    let listed = |year| totals.known(&filter(year), page(0)).listed;
    assert_eq!(listed(0), Some(vec![1, 1]));
    totals.list(&filter(every as i32), &known, (9, 1), vec![3; LISTED]);
    assert_eq!(listed(0), None);
    assert!(
        !totals.known(&filter(0), page(0)).listable,
        "not at this version"
    );
    assert_eq!(listed(every as i32), Some(vec![3, 3]));
    assert_eq!(totals.state().listed, LISTED);
    assert_eq!(read(&totals, 0, 10, 4), Some(4));
    assert!(totals.known(&filter(0), page(0)).listable, "at the next");
}

#[test]
fn one_request_at_a_time_reads_a_filters_ids() {
    let totals = Totals::default();
    let year = filter(2010);
    assert!(totals.claim(&year).is_none(), "no total kept");
    assert_eq!(read(&totals, 2010, 7, 3), Some(3));
    let claim = totals.claim(&year);
    assert!(claim.is_some());
    assert!(totals.claim(&year).is_none(), "being read");
    // Given up when dropped, the read done or its request gone.
    drop(claim);
    let claim = totals.claim(&year);
    assert!(claim.is_some());
    // Counts and ids kept meanwhile, at this version or the next, leave it claimed.
    assert_eq!(read(&totals, 2010, 8, 4), Some(4));
    let known = totals.known(&year, Some((0, 2)));
    totals.list(&year, &known, (8, 1), vec![4, 9, 12, 15]);
    assert!(totals.claim(&year).is_none(), "still being read");
    drop(claim);
    assert!(totals.claim(&year).is_some());
}
