//! Creates written together: fewer statements, each create its own result, counts
//! spread over slots and folded.

use super::*;

/// Creates sent at once go to the database in fewer statements than creates (a host's
/// statement-level trigger counts them), also for a role with rights on the tables only
/// (none on the id sequence).
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_sent_together_share_statements_under_a_table_only_role() {
    let cleanup = cleanup();
    let (owner, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    let setup = "DO $$ BEGIN CREATE ROLE books_test_writer LOGIN; \
                 EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$; \
                 GRANT USAGE ON SCHEMA {n} TO books_test_writer; \
                 GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {n} \
                     TO books_test_writer; \
                 CREATE TABLE {s}statements (n INT); \
                 CREATE FUNCTION {s}count_statement() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN INSERT INTO statements VALUES (1); RETURN NULL; END $$ SECURITY DEFINER; \
                 ALTER FUNCTION {s}count_statement() SET search_path = {n}; \
                 CREATE TRIGGER count_statement AFTER INSERT ON {s}books \
                 FOR EACH STATEMENT EXECUTE FUNCTION {s}count_statement()";
    let setup = setup
        .replace("{s}", &format!("{schema}."))
        .replace("{n}", &schema);
    sqlx::raw_sql(AssertSqlSafe(setup))
        .execute(&host)
        .await
        .unwrap();
    let author = books_core::store::AuthorStore::add_author(&owner, Some("A"))
        .await
        .unwrap();
    let options = PostgresStore::options(&url())
        .unwrap()
        .username("books_test_writer");
    let writer = PostgresStore::connect_lazy_with(options)
        .in_schema(&schema)
        .unwrap();
    let books: Vec<_> = (0..20)
        .map(|n| books_core::store::BookInput {
            title: format!("book {n}"),
            author_id: author,
            year: 2020,
        })
        .collect();
    let now = chrono::DateTime::UNIX_EPOCH;
    let sent = books.iter().map(|book| writer.create(book, now));
    for (book, created) in books.iter().zip(futures_util::future::join_all(sent).await) {
        assert_eq!(created.unwrap().title, book.title);
    }
    let statements: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {schema}.statements"
    )))
    .fetch_one(&host)
    .await
    .unwrap();
    assert!(statements < 10, "{statements} statements for 20 creates");
    assert_eq!(
        writer
            .list(&books_core::store::ListQuery::new(0, 1))
            .await
            .unwrap()
            .total,
        20
    );
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_create_fails_alone() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    let sql = "CREATE FUNCTION {s}reject() RETURNS trigger LANGUAGE plpgsql AS $$ \
               BEGIN IF NEW.title = 'rejected' THEN RAISE EXCEPTION 'rejected'; END IF; \
               RETURN NEW; END $$; \
               CREATE TRIGGER reject BEFORE INSERT ON {s}books \
               FOR EACH ROW EXECUTE FUNCTION {s}reject()";
    sqlx::raw_sql(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
        .execute(&host)
        .await
        .unwrap();
    common::a_rejected_create_fails_alone(ours).await;
}

#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_row_sends_its_batch_one_at_a_time() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    let sql = "CREATE FUNCTION {s}shout() RETURNS trigger LANGUAGE plpgsql AS $$ \
               BEGIN IF NEW.title = 'shout' THEN NEW.title := 'SHOUT'; END IF; \
               RETURN NEW; END $$; \
               CREATE TRIGGER shout BEFORE INSERT ON {s}books \
               FOR EACH ROW EXECUTE FUNCTION {s}shout()";
    sqlx::raw_sql(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
        .execute(&host)
        .await
        .unwrap();
    common::a_changed_row_sends_its_batch_one_at_a_time(ours).await;
}

/// Concurrent creates spread their counts over slots (no single hot row), and once a
/// statement moves ids on to the next range, the closed range's slots fold into one row:
/// a deep page's prefix sum reads one row per closed range; a bulk insert adds one row per
/// range. Totals stay exact throughout.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_spread_then_fold() {
    use futures_util::StreamExt;
    let cleanup = cleanup();
    let store = fresh(&cleanup).await;
    let schema = store.schema().unwrap().to_owned();
    let author = books_core::store::AuthorStore::add_author(&store, Some("A"))
        .await
        .unwrap();
    let create = |n: usize| {
        let store = store.clone();
        async move {
            let book = books_core::store::BookInput {
                title: format!("Book {n}"),
                author_id: author,
                year: 2020,
            };
            store.create(&book, chrono::Utc::now()).await.unwrap();
        }
    };
    let host = PgPool::connect(&url()).await.unwrap();
    let count = async |sql: &str| -> i64 {
        sqlx::query_scalar(AssertSqlSafe(sql.replace("{s}", &format!("{schema}."))))
            .fetch_one(&host)
            .await
            .unwrap()
    };
    let stream = futures_util::stream::iter(0..1000).map(create);
    stream.buffer_unordered(16).collect::<Vec<()>>().await;
    let slots = "SELECT COUNT(*) FROM {s}book_count WHERE n <> 0";
    assert!(count(slots).await > 1, "counts spread over slots");
    let open = "SELECT COUNT(*) FROM {s}book_ranges WHERE bucket = 0";
    assert!(count(open).await > 1, "the open range has several slots");
    // One statement of `n` books, counted by the trigger once.
    let insert = async |n: u32| {
        count(&format!(
            "WITH done AS (INSERT INTO {{s}}books (title, author_id, year, created_at, \
             updated_at) SELECT 'Bulk', {author}, 2020, now(), now() \
             FROM generate_series(1, {n}) RETURNING 1) SELECT COUNT(*) FROM done"
        ))
        .await
    };
    // One statement that enters the next range past its first id (ids 1001 to 1100, as
    // a batch of creates may) folds the range it closed.
    insert(100).await;
    assert_eq!(count(open).await, 1, "the closed range folded into one row");
    let total = "SELECT SUM(n)::BIGINT FROM {s}book_ranges";
    assert_eq!(count(total).await, 1100);
    // A bulk insert counts once per statement: one row per range it fills.
    insert(3000).await;
    let bulk_ranges = "SELECT COUNT(*) FROM {s}book_ranges WHERE bucket BETWEEN 2 AND 3";
    assert_eq!(
        count(bulk_ranges).await,
        2,
        "one row for each range the bulk filled"
    );
    assert_eq!(count(total).await, 4100);
    assert_eq!(
        store
            .list(&books_core::store::ListQuery::new(0, 1))
            .await
            .unwrap()
            .total,
        4100
    );
    assert_eq!(
        store
            .list(&books_core::store::ListQuery::new(4099, 5))
            .await
            .unwrap()
            .books
            .len(),
        1
    );
}

/// Two stores over one database (two processes during a rollout, say) writing batches at
/// once: batches of both enter each new range together, and each folds the range it
/// closed. Every create succeeds at its first try (PostgreSQL counts no deadlock in the
/// database) and the totals stay exact.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_enter_ranges_together_without_a_deadlock() {
    let cleanup = cleanup();
    let database = fresh_database(&cleanup).await;
    let host = PgPool::connect(&url()).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&host)
        .await
        .unwrap();
    let options = PostgresStore::options(&url()).unwrap().database(&database);
    let ours = PostgresStore::connect_lazy_with(options.clone());
    ours.migrate().await.unwrap();
    let theirs = PostgresStore::connect_lazy_with(options.clone());
    let author = books_core::store::AuthorStore::add_author(&ours, Some("A"))
        .await
        .unwrap();
    let book = books_core::store::BookInput {
        title: "Two writers".to_owned(),
        author_id: author,
        year: 2020,
    };
    // 250 waves of 40 creates from each store: ids pass 19 range boundaries.
    let mut failed = vec![];
    for _ in 0..250 {
        let sent = (0..40)
            .flat_map(|_| [&ours, &theirs].map(|store| store.create(&book, chrono::Utc::now())));
        let created = futures_util::future::join_all(sent).await;
        failed.extend(created.into_iter().filter_map(Result::err));
    }
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        failed[0]
    );
    let total = theirs
        .list(&books_core::store::ListQuery::new(0, 1))
        .await
        .unwrap()
        .total;
    assert_eq!(total, 20_000);
    let sum: i64 = sqlx::query_scalar("SELECT SUM(n)::BIGINT FROM book_ranges")
        .fetch_one(&mut PgConnection::connect_with(&options).await.unwrap())
        .await
        .unwrap();
    assert_eq!(sum, 20_000, "the ranges count every book");
    // A backend hands its counts in as it ends, before it leaves `pg_stat_activity`.
    ours.close().await;
    theirs.close().await;
    let gone = Instant::now() + Duration::from_secs(10);
    let connected = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1";
    while sqlx::query_scalar::<_, i64>(connected)
        .bind(&database)
        .fetch_one(&host)
        .await
        .unwrap()
        > 0
    {
        assert!(Instant::now() < gone, "the stores' connections did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadlocks: i64 =
        sqlx::query_scalar("SELECT deadlocks FROM pg_stat_database WHERE datname = $1")
            .bind(&database)
            .fetch_one(&host)
            .await
            .unwrap();
    assert_eq!(deadlocks, 0, "writers waited out a deadlock");
}

/// A host's transaction holds a slot of a range (its first insert) when a batch of ours
/// enters the next range, and then enters it too: each fold leaves out the slots the
/// other holds, so neither waits for the other's (a deadlock, which PostgreSQL settled
/// by failing one). Both commit; the sums count every book.
#[cfg_attr(
    not(books_test_postgres),
    ignore = "BOOKS_TEST_POSTGRES_URL is not set"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_folds_a_range_past_a_hosts_open_slot() {
    let cleanup = cleanup();
    let (ours, _, schema, host) = two_stores_and_a_host(&cleanup).await;
    let author = books_core::store::AuthorStore::add_author(&ours, Some("A"))
        .await
        .unwrap();
    let s = format!("{schema}.");
    // Ids from 1021 on, and every slot of range 0 a row already, as after many writers:
    // a write locks its slot's row.
    let setup = format!(
        "SELECT setval(pg_get_serial_sequence('{s}books', 'id'), 1020); \
         INSERT INTO {s}book_ranges (bucket, slot, n) SELECT 0, slot, 0 \
         FROM generate_series(0, 15) slot"
    );
    sqlx::raw_sql(AssertSqlSafe(setup))
        .execute(&host)
        .await
        .unwrap();
    let insert = format!(
        "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
         VALUES ('Host', {author}, 2020, now(), now())"
    );
    let mut tx = host.begin().await.unwrap();
    sqlx::query(AssertSqlSafe(insert.clone())) // id 1021: a slot of range 0
        .execute(&mut *tx)
        .await
        .unwrap();
    let book = books_core::store::BookInput {
        title: "Ours".to_owned(),
        author_id: author,
        year: 2020,
    };
    let store = ours.clone();
    let created = tokio::spawn(async move {
        let sent = (0..10).map(|_| store.create(&book, chrono::DateTime::UNIX_EPOCH));
        futures_util::future::join_all(sent).await // ids 1022 to 1031: range 1 entered
    });
    // Until our batch is written, or waits on a lock (as it did on the host's slot).
    let waiting = "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                   AND query LIKE '%INSERT INTO books%'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while !created.is_finished() {
        let waits: i64 = sqlx::query_scalar(waiting).fetch_one(&host).await.unwrap();
        if waits > 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Id 1032: the host enters range 1 too and folds range 0.
    let entered = sqlx::query(AssertSqlSafe(insert)).execute(&mut *tx).await;
    let committed = match entered {
        Ok(_) => tx.commit().await,
        Err(error) => Err(error),
    };
    let created = created.await.unwrap();
    assert!(committed.is_ok(), "the host's transaction: {committed:?}");
    for created in created {
        assert!(created.is_ok(), "{created:?}");
    }
    let sum: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT SUM(n)::BIGINT FROM {s}book_ranges"
    )))
    .fetch_one(&host)
    .await
    .unwrap();
    assert_eq!(sum, 12, "the ranges count every book");
}
