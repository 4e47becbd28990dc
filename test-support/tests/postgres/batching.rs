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
