//! books-sqlx's parts for a store over a host's own tables, checked on each database:
//! [`KeyRecords`](books_sqlx::KeyRecords), [`BookTables`](books_sqlx::BookTables) and
//! [`retry_conflicts`](books_sqlx::retry_conflicts).

use books_core::store::ListQuery;

/// books-sqlx's [`KeyRecords`](books_sqlx::KeyRecords) over a host's `table` on `pool`:
/// installed twice; a record kept in a transaction and read back; a second keep of the
/// key refused while it lives, and refused too when it races an open keep (waiting for
/// its commit); replaced once expired; forgotten once expired.
pub async fn key_records_keep_replay_and_expire<DB: books_sqlx::Backend>(
    pool: &books_sqlx::sqlx::Pool<DB>,
    table: &str,
) {
    use std::time::Duration as Wait;

    use books_core::store::{BookRecord, IdempotencyKey, StoredAnswer};
    use chrono::{Duration, TimeZone, Utc};
    use tokio::time::timeout;

    let keys = books_sqlx::KeyRecords::<DB>::new(table).unwrap();
    keys.install(pool).await.unwrap();
    keys.install(pool).await.expect("install may be run again");
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let book = BookRecord {
        id: 7,
        title: "Dune".into(),
        year: 1965,
        author_id: Some(1),
        author_name: Some("Frank Herbert".into()),
        created_at: t0,
        updated_at: t0,
    };
    let key = |fingerprint: &[u8], hours| IdempotencyKey {
        key: "key-1".into(),
        fingerprint: fingerprint.to_vec(),
        expires_at: t0 + Duration::hours(hours),
        answer: std::sync::Arc::new(|book: &BookRecord| StoredAnswer {
            status: 201,
            content_type: "application/json".into(),
            location: format!("/api/books/{}", book.id),
            etag: "\"e1\"".into(),
            body: book.title.clone().into_bytes(),
        }),
    };
    let keep = |fingerprint: &'static [u8], hours, at| {
        let (keys, key, book) = (keys.clone(), key(fingerprint, hours), book.clone());
        async move {
            let mut tx = pool.begin().await.unwrap();
            let kept = keys.keep(&mut tx, &key, &book, at).await.unwrap();
            (kept, tx)
        }
    };
    let fingerprint = |at| {
        let keys = keys.clone();
        async move {
            let mut conn = pool.acquire().await.unwrap();
            let record = keys.record(&mut conn, "key-1", at).await.unwrap();
            record.map(|record| (record.fingerprint, record.answer))
        }
    };

    let (kept, tx) = keep(b"one", 1, t0).await;
    assert!(kept);
    tx.commit().await.unwrap();
    let (first, answer) = fingerprint(t0).await.expect("the record kept");
    assert_eq!(first, b"one");
    assert_eq!(
        (answer.status, answer.location.as_str()),
        (201, "/api/books/7")
    );
    assert_eq!(
        (answer.etag.as_str(), &answer.body[..]),
        ("\"e1\"", &b"Dune"[..])
    );

    let (kept, tx) = keep(b"two", 2, t0 + Duration::minutes(30)).await;
    assert!(!kept, "a live record is not replaced");
    drop(tx);
    let live = fingerprint(t0 + Duration::minutes(30)).await;
    assert_eq!(live.map(|(f, _)| f), Some(b"one".to_vec()));
    assert!(
        fingerprint(t0 + Duration::hours(1)).await.is_none(),
        "expired at its time"
    );

    // Expired: replaced; a keep that races it waits for its commit and is refused.
    let (kept, open) = keep(b"two", 3, t0 + Duration::hours(2)).await;
    assert!(kept, "an expired record is replaced");
    let raced = std::sync::atomic::AtomicBool::new(false);
    let racer = async {
        let outcome = keep(b"three", 4, t0 + Duration::hours(2)).await;
        raced.store(true, std::sync::atomic::Ordering::SeqCst);
        outcome
    };
    let commit = async {
        tokio::time::sleep(Wait::from_millis(200)).await;
        let waited = !raced.load(std::sync::atomic::Ordering::SeqCst);
        assert!(waited, "the racing keep waits for the open one");
        open.commit().await.unwrap();
    };
    let ((kept, tx), ()) = timeout(Wait::from_secs(30), async { tokio::join!(racer, commit) })
        .await
        .expect("the racing keep ends within 30 s");
    assert!(!kept, "a keep that raced a committed one is refused");
    drop(tx);
    let now = fingerprint(t0 + Duration::hours(2)).await;
    assert_eq!(now.map(|(f, _)| f), Some(b"two".to_vec()));

    let mut conn = pool.acquire().await.unwrap();
    let at = t0 + Duration::hours(2);
    assert_eq!(keys.forget_expired(&mut conn, at, 10).await.unwrap(), 0);
    let at = t0 + Duration::hours(3);
    assert_eq!(keys.forget_expired(&mut conn, at, 10).await.unwrap(), 1);
    assert!(fingerprint(t0).await.is_none(), "forgotten");
}

/// A host's books and authors tables for [`book_tables_read_in_the_api_names`]: their
/// `CREATE TABLE`s (in `schema`, a prefix with its dot or empty), how a write
/// transaction begins, and a time literal the books' time columns take.
pub struct HostTables {
    pub schema: String,
    pub create: [&'static str; 2],
    pub begin_write: &'static str,
    pub time: &'static str,
}

/// books-sqlx's [`BookTables`](books_sqlx::BookTables) over a host's tables of other
/// names: a book in the API's names, its author's name or none; a page and its filtered
/// total; the title compared as the contract says whatever the column's collation
/// (ASCII letters folded, `é` and `É` apart); the sort; and a book locked for a
/// conditional write holding off another writer until its transaction ends.
pub async fn book_tables_read_in_the_api_names<DB>(
    pool: &books_sqlx::sqlx::Pool<DB>,
    host: HostTables,
) where
    DB: books_sqlx::Backend,
    for<'c> &'c mut DB::Connection: books_sqlx::sqlx::Executor<'c, Database = DB>,
{
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use books_core::store::{ListFilter, SortField, SortKey, YearRange};
    use books_sqlx::sqlx::{self, AssertSqlSafe};
    use books_sqlx::{AuthorColumns, BookColumns, BookTables};

    let s = host.schema.clone();
    let run = |text: String| async move {
        sqlx::raw_sql(AssertSqlSafe(text))
            .execute(pool)
            .await
            .unwrap();
    };
    for create in host.create {
        run(create.replace("{s}", &s)).await;
    }
    run(format!(
        "INSERT INTO {s}people (person_code, display_name) VALUES (1, 'Ann'), (2, NULL)"
    ))
    .await;
    let t = host.time;
    run(format!(
        "INSERT INTO {s}titles (title_code, heading, released, penned_by, inserted_at, touched_at) \
         VALUES (1, 'Dune', 1965, 1, {t}, {t}), (2, 'dune messiah', 1969, 1, {t}, {t}), \
         (3, 'Élan', 2001, 2, {t}, {t}), (4, 'élan vital', 2007, 9, {t}, {t})"
    ))
    .await;
    // `'static` names for the part: leaked, once per test.
    let name = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
    let tables = BookTables::<DB>::new(
        name(format!("{s}titles t")),
        BookColumns {
            id: "t.title_code",
            title: "t.heading",
            year: "t.released",
            author_id: "t.penned_by",
            created_at: "t.inserted_at",
            updated_at: "t.touched_at",
            folded_title: None,
        },
        AuthorColumns {
            table: name(format!("{s}people p")),
            id: "p.person_code",
            name: "p.display_name",
        },
    );

    let mut conn = pool.acquire().await.unwrap();
    let dune = tables.book(&mut conn, 1).await.unwrap().expect("book 1");
    assert_eq!(
        (dune.title.as_str(), dune.year, dune.author_id),
        ("Dune", 1965, Some(1))
    );
    assert_eq!(dune.author_name.as_deref(), Some("Ann"));
    let nameless = tables.book(&mut conn, 3).await.unwrap().unwrap();
    assert_eq!((nameless.author_id, nameless.author_name), (Some(2), None));
    let orphan = tables.book(&mut conn, 4).await.unwrap().unwrap();
    assert_eq!((orphan.author_id, orphan.author_name), (Some(9), None));
    assert!(tables.book(&mut conn, 5).await.unwrap().is_none());
    drop(conn);

    let page = |query: ListQuery| {
        let tables = &tables;
        async move {
            let mut tx = books_sqlx::snapshot(pool).await.unwrap();
            let page = tables.page(&mut tx, &query).await.unwrap();
            (
                page.books.iter().map(|b| b.id).collect::<Vec<_>>(),
                page.total,
            )
        }
    };
    let filtered = |filter: ListFilter| ListQuery::new(0, 10).with_filter(filter);
    assert_eq!(page(ListQuery::new(1, 2)).await, (vec![2, 3], 4));
    let mut title = ListFilter::default();
    title.title = Some("DUNE".into());
    assert_eq!(
        page(filtered(title.clone())).await,
        (vec![1, 2], 2),
        "ASCII letters fold"
    );
    title.title = Some("élan".into());
    assert_eq!(
        page(filtered(title.clone())).await,
        (vec![4], 1),
        "é is not É"
    );
    let mut by_author = ListFilter::default();
    by_author.author_ids = vec![1];
    by_author.years = vec![YearRange {
        from: Some(1966),
        to: None,
    }];
    assert_eq!(page(filtered(by_author)).await, (vec![2], 1));
    let sorted = ListQuery::new(0, 10).with_sort(vec![SortKey {
        field: SortField::Title,
        descending: false,
    }]);
    // By code point with ASCII letters lowered: "dune", "dune messiah", then "Élan"
    // (U+00C9) and "élan vital" (U+00E9), both above every ASCII letter.
    let (ids, total) = page(sorted).await;
    assert_eq!((&ids[..2], total), (&[1, 2][..], 4));
    assert_eq!(
        ids[2..].to_vec(),
        vec![3, 4],
        "É (U+00C9) before é (U+00E9)"
    );

    // A conditional write's lock holds another writer off until the transaction ends.
    let mut tx = pool.begin_with(host.begin_write).await.unwrap();
    let locked = tables.locked(&mut tx, 1).await.unwrap().expect("book 1");
    assert_eq!(
        (locked.title.as_str(), locked.author_name.as_deref()),
        ("Dune", Some("Ann"))
    );
    assert!(tables.locked(&mut tx, 5).await.unwrap().is_none());
    // Another program retitles the book, and renames its author (whose name is in the
    // book's `ETag`): each waits for the lock.
    let (retitled, renamed) = (AtomicBool::new(false), AtomicBool::new(false));
    let retitle = async {
        run(format!(
            "UPDATE {s}titles SET heading = 'Dune 2' WHERE title_code = 1"
        ))
        .await;
        retitled.store(true, Ordering::SeqCst);
    };
    let rename = async {
        run(format!(
            "UPDATE {s}people SET display_name = 'Anne' WHERE person_code = 1"
        ))
        .await;
        renamed.store(true, Ordering::SeqCst);
    };
    let holder = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let waited = (
            !retitled.load(Ordering::SeqCst),
            !renamed.load(Ordering::SeqCst),
        );
        assert_eq!(
            waited,
            (true, true),
            "the book's and its author's writers wait"
        );
        tx.commit().await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(retitle, rename, holder)
    })
    .await
    .expect("the other writes end within 30 s");
    assert!(retitled.load(Ordering::SeqCst) && renamed.load(Ordering::SeqCst));
}

/// books-sqlx's [`retry_conflicts`](books_sqlx::retry_conflicts) in a host's `table` (a
/// name it creates): two transactions that update two rows in opposite orders deadlock,
/// and the database rolls one back as [`is_conflict`](books_sqlx::is_conflict) says;
/// sent through `retry_conflicts`, both commit. (SQLite's writers wait for each other
/// instead: its binary does not run it.)
#[allow(dead_code)]
pub async fn crossed_writes_are_sent_again<DB>(pool: &books_sqlx::sqlx::Pool<DB>, table: &str)
where
    DB: books_sqlx::Backend,
    for<'c> &'c mut DB::Connection: books_sqlx::sqlx::Executor<'c, Database = DB>,
{
    use std::time::Duration;

    use books_sqlx::sqlx::{self, AssertSqlSafe};
    use books_sqlx::{is_conflict, retry_conflicts};

    let sql = |text: String| sqlx::raw_sql(AssertSqlSafe(text));
    sql(format!(
        "CREATE TABLE {table} (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"
    ))
    .execute(pool)
    .await
    .unwrap();
    sql(format!("INSERT INTO {table} (id, n) VALUES (1, 0), (2, 0)"))
        .execute(pool)
        .await
        .unwrap();
    let crossed = |first: i64, second: i64| async move {
        let mut tx = pool.begin().await?;
        let add = |id| sql(format!("UPDATE {table} SET n = n + 1 WHERE id = {id}"));
        add(first).execute(&mut *tx).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        add(second).execute(&mut *tx).await?;
        tx.commit().await
    };
    let bound = Duration::from_secs(30);

    let (a, b) = tokio::time::timeout(bound, async { tokio::join!(crossed(1, 2), crossed(2, 1)) })
        .await
        .expect("both end within 30 s");
    let failed: Vec<sqlx::Error> = [a, b].into_iter().filter_map(Result::err).collect();
    assert_eq!(failed.len(), 1, "one of the two is rolled back: {failed:?}");
    assert!(
        is_conflict(&failed[0]),
        "a conflict to send again: {:?}",
        failed[0]
    );

    let (a, b) = tokio::time::timeout(bound, async {
        tokio::join!(
            retry_conflicts(|| crossed(1, 2)),
            retry_conflicts(|| crossed(2, 1))
        )
    })
    .await
    .expect("both end within 30 s");
    a.expect("sent again, it commits");
    b.expect("sent again, it commits");
    // Each row: once from the first round's survivor, twice from the second.
    let done = sql(format!("SELECT id FROM {table} WHERE n = 3"));
    assert_eq!(done.fetch_all(pool).await.unwrap().len(), 2);
}
