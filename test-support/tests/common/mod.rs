//! What the host-database tests of the SQL stores share; the checks of books-sqlx's parts
//! for a host's own store in [`parts`].

pub mod parts;

use books_core::store::{AuthorStore, BookInput, BookStore, ListQuery, StoreError};
use books_core::testing::store_cases::OutsideWrite;
use books_core::{BooksApi, Config};
use books_sqlx::sqlx::SqlSafeStr;
use books_sqlx::sqlx::migrate::{Migration, MigrationType, Migrator};

/// A host's own sqlx migrations: a table of its own, sqlx's default bookkeeping table.
pub fn host_migrator() -> Migrator {
    Migrator::with_migrations(vec![Migration::new(
        20250101000000,
        "host widgets".into(),
        MigrationType::Simple,
        "CREATE TABLE widgets (id INTEGER PRIMARY KEY, name TEXT)".into_sql_str(),
        false,
    )])
}

/// Creates a book through the API over `store` and finds it first in the list.
pub async fn api_works(store: impl BookStore + AuthorStore + Clone) {
    let author = store.add_author(Some("Host Author")).await.unwrap();
    let api = BooksApi::new(store, Config::default());
    let create = http::Request::post("/api/books")
        .body(format!("title=Hosted&author_id={author}&year=2020"))
        .unwrap();
    assert_eq!(api.handle(create).await.status(), 201);
    let list = http::Request::get("/api/books")
        .body(String::new())
        .unwrap();
    let body = api.handle(list).await.into_body();
    assert!(
        body.starts_with(br#"{"data":[{"id":1,"title":"Hosted""#),
        "{body:?}"
    );
}

async fn call(api: &BooksApi, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .body(body.to_owned())
        .unwrap();
    let response = api.handle(request).await;
    let json = serde_json::from_slice(response.body()).unwrap_or_default();
    (response.status().as_u16(), json)
}

/// A value a host's statement binds.
pub enum Value {
    Int(i64),
    Text(String),
}

/// A database of the tests, for what its SQL spells differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // each test binary uses one
pub enum Db {
    Sqlite,
    Postgres,
    MySql,
}

/// The tables a backup holds: everything the store keeps but its idempotency keys, and
/// each one's columns (MariaDB's `title_key` is generated).
const BACKED_UP: [(&str, &str); 5] = [
    ("authors", "id, name"),
    (
        "books",
        "id, title, author_id, year, created_at, updated_at",
    ),
    ("book_count", "*"),
    ("book_ranges", "*"),
    ("book_groups", "*"),
];

/// What the host runs, as text, for a backup taken (`Snapshot`) or restored (`Restore`)
/// under the store, tables written `{s}books`; `None` for any other write. A restore
/// puts every table's rows back as they were, the counters the triggers keep (and so the
/// version) included, as restoring a dump would; on PostgreSQL with the triggers off and
/// the identities set back, as `pg_restore --disable-triggers` does.
pub fn backup_sql(write: &OutsideWrite, db: Db) -> Option<Vec<String>> {
    let (restore, name) = match write {
        OutsideWrite::Snapshot { name } => (false, name),
        OutsideWrite::Restore { name } => (true, name),
        _ => return None,
    };
    let mut script = Vec::new();
    if !restore {
        for (table, _) in BACKED_UP {
            script.push(format!("DROP TABLE IF EXISTS {{s}}{name}_{table}"));
            script.push(format!(
                "CREATE TABLE {{s}}{name}_{table} AS SELECT * FROM {{s}}{table}"
            ));
        }
        return Some(script);
    }
    match db {
        Db::Postgres => {
            script.push("SET session_replication_role = replica".into());
            let tables: Vec<String> = BACKED_UP.iter().map(|(t, _)| format!("{{s}}{t}")).collect();
            script.push(format!("TRUNCATE {}", tables.join(", ")));
        }
        Db::MySql => {
            script.push("SET foreign_key_checks = 0".into());
            for (table, _) in BACKED_UP {
                script.push(format!("DELETE FROM {{s}}{table}"));
            }
        }
        Db::Sqlite => {
            for (table, _) in BACKED_UP.iter().rev() {
                script.push(format!("DELETE FROM {{s}}{table}"));
            }
        }
    }
    // Authors and books first (their triggers, where they fire, move the counters),
    // then the counters as they were.
    for (table, columns) in BACKED_UP {
        let overriding = if db == Db::Postgres && table == "books" {
            " OVERRIDING SYSTEM VALUE"
        } else {
            ""
        };
        if table == "book_count" && db != Db::Postgres {
            for (table, _) in &BACKED_UP[2..] {
                script.push(format!("DELETE FROM {{s}}{table}"));
            }
        }
        let select = if columns == "*" {
            "*".to_owned()
        } else {
            columns.to_owned()
        };
        let into = if columns == "*" {
            String::new()
        } else {
            format!(" ({columns})")
        };
        script.push(format!(
            "INSERT INTO {{s}}{table}{into}{overriding} SELECT {select} FROM {{s}}{name}_{table}"
        ));
    }
    match db {
        Db::Postgres => {
            for table in ["authors", "books"] {
                script.push(format!(
                    "SELECT setval(pg_get_serial_sequence('{{s}}{table}', 'id'), \
                     COALESCE((SELECT MAX(id) FROM {{s}}{name}_{table}), 0) + 1, false)"
                ));
            }
            script.push("SET session_replication_role = origin".into());
        }
        Db::MySql => script.push("SET foreign_key_checks = 1".into()),
        Db::Sqlite => {
            for table in ["authors", "books"] {
                script.push(format!(
                    "UPDATE sqlite_sequence SET seq = COALESCE((SELECT MAX(id) FROM \
                     {name}_{table}), 0) WHERE name = '{table}'"
                ));
            }
        }
    }
    Some(script)
}

/// What a host runs for a backup of `tables` taken (`Snapshot`: each copied aside) or
/// restored (`Restore`: every row deleted, then put back, in the order given, so the
/// version's counters go last and end as they were); `None` for any other write.
#[allow(dead_code)] // the PostgreSQL and MariaDB host stores' (SQLite's is the example's)
pub fn tables_backup_sql(write: &OutsideWrite, tables: &[&str]) -> Option<Vec<String>> {
    Some(match write {
        OutsideWrite::Snapshot { name } => tables
            .iter()
            .flat_map(|t| {
                [
                    format!("DROP TABLE IF EXISTS {name}_{t}"),
                    format!("CREATE TABLE {name}_{t} AS SELECT * FROM {t}"),
                ]
            })
            .collect(),
        OutsideWrite::Restore { name } => tables
            .iter()
            .map(|t| format!("DELETE FROM {t}"))
            .chain(
                tables
                    .iter()
                    .map(|t| format!("INSERT INTO {t} SELECT * FROM {name}_{t}")),
            )
            .collect(),
        _ => return None,
    })
}

/// What a host's own SQL runs for a write from outside the store: the statement (tables
/// written `{s}books`, so each store can put its schema there; `$N` placeholders, which
/// SQLite and PostgreSQL take and the MariaDB tests make `?`) and its arguments.
pub fn outside_sql(write: OutsideWrite) -> (&'static str, Vec<Value>) {
    match write {
        OutsideWrite::AddBook {
            title,
            author_id,
            year,
        } => (
            "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
             VALUES ($1, $2, $3, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
            vec![
                Value::Text(title),
                Value::Int(author_id),
                Value::Int(year.into()),
            ],
        ),
        OutsideWrite::Retitle { id, title } => (
            "UPDATE {s}books SET title = $1 WHERE id = $2",
            vec![Value::Text(title), Value::Int(id)],
        ),
        OutsideWrite::DeleteBook { id } => {
            ("DELETE FROM {s}books WHERE id = $1", vec![Value::Int(id)])
        }
        OutsideWrite::RenameAuthor { id, name } => (
            "UPDATE {s}authors SET name = $1 WHERE id = $2",
            vec![Value::Text(name), Value::Int(id)],
        ),
        other => panic!("no one statement for {other:?}: see backup_sql"),
    }
}

/// Two APIs over one database, as two processes would be, each caching rendered
/// answers, and a host's own SQL (as above): every read after a write acknowledged anywhere shows it.
pub async fn cache_is_exact_across_writers<S>(
    ours: S,
    theirs: S,
    host: impl AsyncFn(&'static str, i64),
) where
    S: BookStore + AuthorStore + Clone,
{
    let author = ours.add_author(Some("Before")).await.unwrap();
    let a = BooksApi::new(ours, Config::default());
    let b = BooksApi::new(theirs, Config::default());
    let form = |title: &str| format!("title={title}&author_id={author}&year=2020");
    let (status, created) = call(&b, "POST", "/api/books", &form("One")).await;
    assert_eq!(status, 201);
    let id = created["id"].as_i64().unwrap();
    let book = format!("/api/books/{id}?include=author");

    for _ in 0..2 {
        let (_, list) = call(&a, "GET", "/api/books?include=author", "").await;
        assert_eq!(list["meta"]["total"], 1);
        assert_eq!(list["data"][0]["author"]["name"], "Before");
    }
    call(&b, "POST", "/api/books", &form("Two")).await;
    let (_, list) = call(&a, "GET", "/api/books?include=author", "").await;
    assert_eq!(list["meta"]["total"], 2, "a create through the other API");

    assert_eq!(call(&a, "GET", &book, "").await.1["title"], "One");
    let (status, _) = call(&b, "PUT", &format!("/api/books/{id}"), &form("Renamed")).await;
    assert_eq!(status, 200);
    assert_eq!(call(&a, "GET", &book, "").await.1["title"], "Renamed");

    host("UPDATE {s}authors SET name = 'After' WHERE id = $1", author).await;
    assert_eq!(
        call(&a, "GET", &book, "").await.1["author"]["name"],
        "After",
        "a host's own UPDATE"
    );
    let (_, list) = call(&a, "GET", "/api/books?include=author", "").await;
    assert_eq!(list["data"][1]["author"]["name"], "After");

    assert_eq!(
        call(&b, "DELETE", &format!("/api/books/{id}"), "").await.0,
        200
    );
    assert_eq!(
        call(&a, "GET", &book, "").await.0,
        404,
        "a delete elsewhere"
    );
}

/// Full pages the cache keeps across creates (rendered again with the new total) stay
/// exact whoever writes: creates through another API, a host's INSERT above the greatest
/// id (an append) and one that fills a deleted id below it (not an append: the pages
/// after it shift), and a host's UPDATE. `overriding` is what an INSERT needs to give
/// an id of its own (PostgreSQL: `OVERRIDING SYSTEM VALUE`).
pub async fn kept_pages_stay_exact_across_writers<S>(
    ours: S,
    theirs: S,
    overriding: &str,
    host: impl AsyncFn(&str, i64),
) where
    S: BookStore + AuthorStore + Clone,
{
    let author = ours.add_author(Some("A")).await.unwrap();
    let config = || Config::default().with_page_size(std::num::NonZeroU32::new(2).unwrap());
    let a = BooksApi::new(ours, config());
    let b = BooksApi::new(theirs, config());
    let form = |title: &str| format!("title={title}&author_id={author}&year=2020");
    let mut ids = Vec::new();
    for title in ["One", "Two", "Three", "Four", "Five"] {
        let (status, created) = call(&b, "POST", "/api/books", &form(title)).await;
        assert_eq!(status, 201);
        ids.push(created["id"].as_i64().unwrap());
    }
    let (status, _) = call(&b, "DELETE", &format!("/api/books/{}", ids[1]), "").await;
    assert_eq!(status, 200);
    let titles = async |page: u64| {
        let (status, list) = call(&a, "GET", &format!("/api/books?page={page}"), "").await;
        assert_eq!(status, 200);
        let titles: Vec<String> = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["title"].as_str().unwrap().to_owned())
            .collect();
        (titles, list["meta"]["total"].as_u64().unwrap())
    };
    let warm = async || {
        for _ in 0..2 {
            for page in 1..=3 {
                titles(page).await;
            }
        }
    };
    warm().await;
    assert_eq!(titles(1).await, (vec!["One".into(), "Three".into()], 4));

    call(&b, "POST", "/api/books", &form("Six")).await;
    assert_eq!(titles(1).await, (vec!["One".into(), "Three".into()], 5));
    assert_eq!(
        titles(3).await,
        (vec!["Six".into()], 5),
        "another API's create"
    );
    warm().await;

    host(
        "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
         VALUES ('Appended', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
        author,
    )
    .await;
    assert_eq!(titles(2).await, (vec!["Four".into(), "Five".into()], 6));
    assert_eq!(
        titles(3).await,
        (vec!["Six".into(), "Appended".into()], 6),
        "a host's append"
    );
    warm().await;

    // The deleted book's id, below the greatest: "Filled" goes between One and Three.
    let filled = format!(
        "INSERT INTO {{s}}books (id, title, author_id, year, created_at, updated_at) \
         {overriding} VALUES ({}, 'Filled', $1, 2020, '2026-01-01 00:00:00', \
         '2026-01-01 00:00:00')",
        ids[1]
    );
    host(&filled, author).await;
    assert_eq!(
        titles(1).await,
        (vec!["One".into(), "Filled".into()], 7),
        "a host's insert below the greatest id"
    );
    assert_eq!(titles(2).await, (vec!["Three".into(), "Four".into()], 7));
    warm().await;

    host(
        "UPDATE {s}books SET title = 'Changed' WHERE author_id = $1 AND title = 'Three'",
        author,
    )
    .await;
    assert_eq!(titles(2).await, (vec!["Changed".into(), "Four".into()], 7));
}

/// Pages at and across the boundaries of range groups (32,768 ids) match a walk through
/// the ids, after a host's bulk load of 70,000 books and deletes around the boundaries
/// (by the host's SQL and through the store).
pub async fn deep_pages_cross_groups<S: BookStore + AuthorStore>(
    store: S,
    host: impl AsyncFn(&'static str, i64),
) {
    let author = store.add_author(Some("A")).await.unwrap();
    host(
        "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
         SELECT 'Bulk', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00' FROM \
         (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 70000) \
          SELECT i FROM n) AS m",
        author,
    )
    .await;
    let first = store.list(&ListQuery::new(0, 1)).await.unwrap().books[0].id;
    let mut ids: Vec<i64> = (first..first + 70_000).collect();
    for start in [32_700, 40_000, 65_500] {
        host(
            "DELETE FROM {s}books WHERE id >= $1 AND id < $1 + 100",
            start,
        )
        .await;
        ids.retain(|id| !(start..start + 100).contains(id));
    }
    for id in [first, first + 69_999, 32_768, 65_536, 65_537] {
        store.delete(id).await.unwrap();
        ids.retain(|&kept| kept != id);
    }
    let last = ids.len();
    for offset in [
        0,
        1_023,
        1_024,
        32_000,
        32_590,
        32_600,
        32_667,
        32_668,
        32_700,
        39_900,
        40_000,
        65_300,
        65_400,
        65_431,
        65_500,
        69_000,
        last - 1,
        last,
    ] {
        let page = store
            .list(&ListQuery::new(offset as u64, 20))
            .await
            .unwrap();
        let got: Vec<i64> = page.books.iter().map(|b| b.id).collect();
        let want: Vec<i64> = ids.iter().skip(offset).take(20).copied().collect();
        assert_eq!(got, want, "offset {offset}");
        assert_eq!(page.total, last as u64, "total at offset {offset}");
    }
}

/// Creates sent at once (which the store may write together) where the database rejects
/// one (a host's trigger refuses the title "rejected") and one names a missing author:
/// those two fail, each with its own error, and the others are written.
pub async fn a_rejected_create_fails_alone<S: BookStore + AuthorStore>(store: S) {
    let author = store.add_author(Some("A")).await.unwrap();
    let books: Vec<BookInput> = (0..20)
        .map(|n| BookInput {
            title: if n == 7 {
                "rejected".into()
            } else {
                format!("book {n}")
            },
            author_id: if n == 12 { author + 100 } else { author },
            year: 2020,
        })
        .collect();
    let now = chrono::DateTime::UNIX_EPOCH;
    let sent = books.iter().map(|book| store.create(book, now));
    for (n, created) in futures_util::future::join_all(sent)
        .await
        .into_iter()
        .enumerate()
    {
        match n {
            7 => assert!(matches!(created, Err(StoreError::Other(_))), "{created:?}"),
            12 => assert!(
                matches!(created, Err(StoreError::AuthorNotFound(id)) if id == author + 100),
                "{created:?}"
            ),
            _ => assert_eq!(created.unwrap().title, books[n].title),
        }
    }
    assert_eq!(store.list(&ListQuery::new(0, 50)).await.unwrap().total, 18);
}

/// Creates written together where a host's trigger changes one book's title on its way
/// (`shout` written as `SHOUT`): which row is whose cannot be told from the rows, so the
/// batch is not committed and each create is written alone. Every caller gets its own
/// book (the changed one as written), each written once.
#[allow(
    dead_code,
    reason = "not SQLite's: its triggers cannot change a row on its way"
)]
pub async fn a_changed_row_sends_its_batch_one_at_a_time<S: BookStore + AuthorStore>(store: S) {
    let author = store.add_author(Some("A")).await.unwrap();
    let books: Vec<BookInput> = (0..20)
        .map(|n| BookInput {
            title: if n == 7 {
                "shout".into()
            } else {
                format!("book {n}")
            },
            author_id: author,
            year: 2020,
        })
        .collect();
    let now = chrono::DateTime::UNIX_EPOCH;
    let sent = books.iter().map(|book| store.create(book, now));
    let mut ids = Vec::new();
    for (n, created) in futures_util::future::join_all(sent)
        .await
        .into_iter()
        .enumerate()
    {
        let created = created.unwrap();
        let title = if n == 7 {
            "SHOUT"
        } else {
            books[n].title.as_str()
        };
        assert_eq!(created.title, title);
        ids.push(created.id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 20, "each create its own book");
    assert_eq!(store.list(&ListQuery::new(0, 50)).await.unwrap().total, 20);
}

/// Creates sent at once (written together in batches, which count their own books where
/// the store does: MariaDB) while the host's own SQL inserts books one at a time
/// beside them (counted by the trigger), across a range and a group boundary (1,024 and
/// 32,768 ids): every count stays exact. The total is every book, and pages from 1,024
/// books on, which start from the ranges' and groups' counts, match the same pages
/// walked through an index (a year's list, which every book is in).
pub async fn batched_creates_count_as_every_other_insert<S: BookStore + AuthorStore>(
    store: S,
    host: impl AsyncFn(&'static str, i64),
) {
    const BULK: u64 = 32_700;
    const OURS: u64 = 300;
    const THEIRS: u64 = 60;
    let author = store.add_author(Some("A")).await.unwrap();
    host(
        "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
         SELECT 'Bulk', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00' FROM \
         (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 32700) \
          SELECT i FROM n) AS m",
        author,
    )
    .await;
    let book = BookInput {
        title: "Batched".into(),
        author_id: author,
        year: 2020,
    };
    let now = chrono::DateTime::UNIX_EPOCH;
    let ours = futures_util::future::join_all((0..OURS).map(|_| store.create(&book, now)));
    let theirs = async {
        for _ in 0..THEIRS {
            host(
                "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
                 VALUES ('Theirs', $1, 2020, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
                author,
            )
            .await;
        }
    };
    let (created, ()) = tokio::join!(ours, theirs);
    for created in created {
        created.expect("every create is written");
    }
    let total = BULK + OURS + THEIRS;
    let mut year = books_core::store::ListFilter::default();
    year.years.push(books_core::store::YearRange::year(2020));
    for offset in [
        1_000,
        1_024,
        1_030,
        32_700,
        32_760,
        32_768,
        32_800,
        total - 20,
    ] {
        let page = store.list(&ListQuery::new(offset, 20)).await.unwrap();
        let walked = store
            .list(&ListQuery::new(offset, 20).with_filter(year.clone()))
            .await
            .unwrap();
        let ids = |page: &books_core::store::BookPage| -> Vec<i64> {
            page.books.iter().map(|b| b.id).collect()
        };
        assert_eq!(ids(&page), ids(&walked), "offset {offset}");
        assert_eq!(
            (page.total, walked.total),
            (total, total),
            "at offset {offset}"
        );
    }
}
