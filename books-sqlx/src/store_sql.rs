//! The store's statements, written once as templates (`{s}`: the tables' schema,
//! `{int8}`: the dialect's 64-bit integer cast, `$N`: the Nth argument) and made into
//! each dialect's text when a store is built. What differs between the databases is
//! spelled out beside what they share.

// Each store uses its own part of what is here: with its feature off, that part is unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]

use crate::key_sql::KeyStatements;
use crate::statement::{Dialect, Statement};

/// The page's total and version columns, summed over the counter's slots.
macro_rules! tally {
    () => {
        ", (SELECT CAST(SUM(n) AS {int8}) FROM {s}book_count) AS total, \
         (SELECT CAST(SUM(version) AS {int8}) FROM {s}book_count) AS version "
    };
}

/// The join's columns, in [`BookRow`](crate::rows::BookRow)'s names.
macro_rules! select_books {
    ($($rest:expr),+ $(,)?) => {
        concat!(
            "SELECT b.id, b.title, b.year, b.author_id, a.name AS author_name, \
             b.created_at, b.updated_at",
            $($rest),+
        )
    };
}

/// A written book as [`BookRow`](crate::rows::BookRow), in the write's own round trip
/// (SQLite's `RETURNING` takes no table alias; `books` names the written row on every
/// database).
macro_rules! returning_book {
    () => {
        "RETURNING id, title, year, author_id, \
         (SELECT a.name FROM {s}authors a WHERE a.id = books.author_id) AS author_name, \
         created_at, updated_at"
    };
}

/// Several books in one statement on PostgreSQL, from arrays of titles, author ids,
/// years and timestamps; a book whose author does not exist is not written (nor
/// returned). One statement, so the insert trigger runs once for all of them, and one
/// that may commit by itself: it fails whole when a row written is not one of the books
/// given (a host's trigger changed it on its way), so that every row returned is its
/// caller's ([`batch::attribute`](crate::batch::attribute) then tells whose). Ids come
/// from the identity column, so the role needs no rights on its sequence.
const CREATE_MANY_POSTGRES: &str = "\
    WITH t AS (SELECT * FROM unnest($1::text[], $2::int8[], $3::int4[], $4::timestamptz[]) \
             AS t(title, author_id, year, at)), \
    written AS ( \
        INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
        SELECT t.title, t.author_id, t.year, t.at, t.at FROM t \
        WHERE EXISTS (SELECT 1 FROM {s}authors a WHERE a.id = t.author_id) \
        RETURNING id, title, year, author_id, created_at, updated_at), \
    strays AS ( \
        SELECT COUNT(*) AS n \
        FROM (SELECT title, author_id, year, created_at AS at, COUNT(*) AS c FROM written \
              GROUP BY 1, 2, 3, 4) w \
        LEFT JOIN (SELECT title, author_id, year, at, COUNT(*) AS c FROM t \
                   GROUP BY 1, 2, 3, 4) g USING (title, author_id, year, at) \
        WHERE g.c IS NULL OR w.c > g.c) \
    SELECT w.id, w.title, w.year, w.author_id, a.name AS author_name, w.created_at, \
           w.updated_at \
    FROM written w LEFT JOIN {s}authors a ON a.id = w.author_id \
    WHERE (SELECT CAST(CASE WHEN n = 0 THEN '0' \
                       ELSE 'rows not the books given: ' || n END AS INTEGER) FROM strays) = 0 \
    ORDER BY w.id";

/// Several books in one statement on MariaDB, from a JSON array of `[title, author id,
/// year, time]`: as PostgreSQL's, a book whose author does not exist is
/// not written (nor returned). Each row is marked `counted`: the insert trigger leaves it
/// to the batch, which counts its books once ([`BookStatements::count_created`]).
const CREATE_MANY_MYSQL: &str = "\
    INSERT INTO {s}books (title, author_id, year, created_at, updated_at, counted) \
    SELECT j.title, j.author_id, j.year, j.at, j.at, TRUE FROM JSON_TABLE($1, '$[*]' COLUMNS ( \
        title VARCHAR(255) PATH '$[0]', author_id BIGINT PATH '$[1]', year INT PATH '$[2]', \
        at DATETIME(6) PATH '$[3]')) j \
    WHERE EXISTS (SELECT 1 FROM {s}authors a WHERE a.id = j.author_id) ";

/// Several books in one statement on SQLite, from a JSON array of `[title, author id,
/// year, time as sqlx writes it]`: as PostgreSQL's, a book whose author does
/// not exist is not written (nor returned). One statement, not one per book: SQLite
/// writes the title trigrams (FTS5) out at every statement of a transaction, so one
/// insert per book cost a flush each (`--create-costs`, BENCHMARKS.md).
const CREATE_MANY_SQLITE: &str = "\
    INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
    SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), \
           json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'), \
           json_extract(j.value, '$[3]') FROM json_each($1) j \
    WHERE EXISTS (SELECT 1 FROM {s}authors a WHERE a.id = json_extract(j.value, '$[1]')) ";

/// The list on SQLite, whose table is its id b-tree: a plain `LIMIT … OFFSET`.
const LIST: &str = select_books!(
    tally!(),
    "FROM {s}books b LEFT JOIN {s}authors a ON a.id = b.author_id \
     ORDER BY b.id LIMIT $1 OFFSET $2"
);

/// The list on PostgreSQL and MariaDB, as a deferred join: an OFFSET walks the primary
/// key only, then the page's ids are joined (PostgreSQL, page 40,000 of 1M books: 1.6 s
/// before, ~0.1 s after; MariaDB, page 50 of 1,000: 0.48 ms against 0.79). On SQLite the
/// rewrite gains nothing and defeats its LIMIT optimisation.
const LIST_DEFERRED: &str = select_books!(
    tally!(),
    "FROM (SELECT id FROM {s}books ORDER BY id LIMIT $1 OFFSET $2) p \
     JOIN {s}books b ON b.id = p.id LEFT JOIN {s}authors a ON a.id = b.author_id ORDER BY b.id"
);

/// Ids per counted range (`book_ranges`): a page at an offset of at least this many
/// books starts from its range's first id instead of walking every row before it.
pub(crate) const RANGE: u64 = 1024;

/// Finds the range a deep page starts in (`s.bucket`) and how many books of it to skip
/// (`s.skip`, fewer than [`RANGE`]) by two short prefix sums: over the groups of 32
/// ranges (`book_groups`) to find the page's group (`sg`), then over that group's ranges.
/// Counts may sit in several slots per group or range, hence the sums.
macro_rules! start_of_page {
    () => {
        "WITH g AS (SELECT grp, SUM(n) AS n, \
                    CAST(SUM(SUM(n)) OVER (ORDER BY grp ROWS UNBOUNDED PRECEDING) AS {int8}) \
                    AS upto FROM {s}book_groups GROUP BY grp), \
         sg AS (SELECT grp, $2 - (upto - n) AS skip FROM g WHERE upto > $2 \
                ORDER BY grp LIMIT 1), \
         r AS (SELECT bucket, SUM(n) AS n, \
                    CAST(SUM(SUM(n)) OVER (ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS {int8}) \
                    AS upto FROM {s}book_ranges \
                    WHERE bucket >= (SELECT grp * 32 FROM sg) \
                      AND bucket < (SELECT grp * 32 + 32 FROM sg) GROUP BY bucket), \
         s AS (SELECT bucket, (SELECT skip FROM sg) - (upto - n) AS skip FROM r \
               WHERE upto > (SELECT skip FROM sg) ORDER BY bucket LIMIT 1) "
    };
}

/// A deep page on SQLite and PostgreSQL (MariaDB's is a procedure of its migration): a
/// deferred join (the skip walks ids only, then the page's ids are joined) from the
/// first id of the page's range. On SQLite it is ≈ 10% faster than skipping joined rows
/// (page 50,000 of 1M).
const DEEP: &str = concat!(
    start_of_page!(),
    select_books!(
        tally!(),
        "FROM (SELECT id FROM {s}books WHERE id >= (SELECT bucket * 1024 FROM s) \
               ORDER BY id LIMIT $1 OFFSET COALESCE((SELECT skip FROM s), 0)) p \
         JOIN {s}books b ON b.id = p.id LEFT JOIN {s}authors a ON a.id = b.author_id \
         ORDER BY b.id"
    )
);

/// One book by id (`$5`: an update's last argument), after MariaDB's update (it has no
/// `UPDATE … RETURNING`).
const BOOK_BY_ID: &str =
    select_books!(" FROM {s}books b LEFT JOIN {s}authors a ON a.id = b.author_id WHERE b.id = $5");

/// The statements of one store, its tables qualified once at construction (a schema on
/// PostgreSQL, nothing elsewhere).
#[derive(Debug)]
pub(crate) struct Statements {
    /// The database these are written for.
    pub(crate) dialect: Dialect,
    /// What goes before each table's name (`""`, or a schema and a dot).
    pub(crate) schema: String,
    /// A page of the plain list, each row with the total and the version.
    pub(crate) list: Statement,
    /// The list from [`RANGE`] books on.
    pub(crate) deep: Statement,
    /// The total and the version, for an empty page.
    pub(crate) tally: Statement,
    pub(crate) books: BookStatements,
    pub(crate) authors: AuthorStatements,
    pub(crate) keys: KeyStatements,
    /// A book's row locked for a conditional write, then its author's (on SQLite plain
    /// reads, in a transaction that holds the database's write lock from its start).
    pub(crate) locks: [Statement; 2],
}

/// One book: read, written, deleted.
#[derive(Debug)]
pub(crate) struct BookStatements {
    /// The book, or its absence, and the version.
    pub(crate) get: Statement,
    pub(crate) create: Statement,
    /// Several books in one statement.
    pub(crate) create_many: Statement,
    /// MariaDB: counts the books [`create_many`](Self::create_many) wrote (a JSON array
    /// of their ids), in its transaction, as the insert trigger counts any other.
    pub(crate) count_created: Option<Statement>,
    pub(crate) update: Statement,
    /// MariaDB: the updated book, read in the update's transaction.
    pub(crate) updated: Option<Statement>,
    pub(crate) delete: Statement,
}

/// Authors: whether one exists, and what hosts, demo data and tests write.
#[derive(Debug)]
pub(crate) struct AuthorStatements {
    pub(crate) exists: Statement,
    pub(crate) add: Statement,
    pub(crate) remove: Statement,
    pub(crate) upsert: Statement,
    /// PostgreSQL: moves the authors' identity past the largest id, after
    /// [`upsert`](Self::upsert) (MariaDB's and SQLite's follow by themselves).
    pub(crate) ids_follow: Option<String>,
}

impl Statements {
    /// `schema` is put before every table name (`""`, or a checked identifier and a dot).
    pub(crate) fn new(dialect: Dialect, schema: &str) -> Self {
        let sql = |template: &str| Statement::new(template, schema, dialect);
        let mysql = dialect == Dialect::MySql;
        let pick = |mysql_template: &str, template: &str| {
            sql(if mysql { mysql_template } else { template })
        };
        let update = "UPDATE {s}books SET title = $1, author_id = $2, year = $3, \
                      updated_at = $4 WHERE id = $5 ";
        // SQLite has no row locks: its conditional writes hold the database's write lock.
        let locking = |clause: &'static str| {
            if dialect == Dialect::Sqlite {
                ""
            } else {
                clause
            }
        };
        Self {
            dialect,
            schema: schema.to_owned(),
            list: sql(match dialect {
                Dialect::Sqlite => LIST,
                _ => LIST_DEFERRED,
            }),
            // MariaDB: a procedure of the migration's (`books_deep_page`).
            deep: pick("CALL {s}books_deep_page($1, $2)", DEEP),
            tally: sql(
                "SELECT CAST(SUM(n) AS {int8}), CAST(SUM(version) AS {int8}) FROM {s}book_count",
            ),
            books: BookStatements {
                // One row whether the book exists or not: the version is read either way.
                get: sql(select_books!(
                    ", v.version FROM (SELECT CAST(SUM(version) AS {int8}) AS version \
                 FROM {s}book_count) v LEFT JOIN {s}books b ON b.id = $1 \
                 LEFT JOIN {s}authors a ON a.id = b.author_id"
                )),
                create: sql(concat!(
                    "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $4) ",
                    returning_book!()
                )),
                create_many: match dialect {
                    Dialect::MySql => sql(&format!("{CREATE_MANY_MYSQL}{}", returning_book!())),
                    Dialect::Sqlite => sql(&format!("{CREATE_MANY_SQLITE}{}", returning_book!())),
                    Dialect::Postgres => sql(CREATE_MANY_POSTGRES),
                },
                count_created: mysql.then(|| sql("CALL {s}books_count_created($1)")),
                update: if mysql {
                    sql(update)
                } else {
                    sql(&format!("{update}{}", returning_book!()))
                },
                updated: mysql.then(|| sql(BOOK_BY_ID)),
                delete: sql("DELETE FROM {s}books WHERE id = $1 RETURNING id"),
            },
            authors: AuthorStatements {
                exists: sql("SELECT EXISTS (SELECT 1 FROM {s}authors WHERE id = $1)"),
                add: sql("INSERT INTO {s}authors (name) VALUES ($1) RETURNING id"),
                remove: sql("DELETE FROM {s}authors WHERE id = $1 RETURNING id"),
                upsert: pick(
                    "INSERT INTO {s}authors (id, name) VALUES ($1, $2) \
                 ON DUPLICATE KEY UPDATE name = VALUES(name)",
                    "INSERT INTO {s}authors (id, name) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name",
                ),
                ids_follow: (dialect == Dialect::Postgres).then(|| {
                    format!(
                        "SELECT setval(pg_get_serial_sequence('{schema}authors', 'id'), \
                     GREATEST((SELECT MAX(id) FROM {schema}authors), 1))"
                    )
                }),
            },
            keys: KeyStatements::new(dialect, &format!("{schema}idempotency_keys")),
            locks: [
                sql(&format!(
                    "SELECT id, title, year, author_id, {} AS author_name, created_at, \
                 updated_at FROM {{s}}books WHERE id = $1{}",
                    if mysql { "NULL" } else { "CAST(NULL AS TEXT)" },
                    locking(" FOR UPDATE"),
                )),
                sql(&format!(
                    "SELECT name FROM {{s}}authors WHERE id = $1{}",
                    match dialect {
                        Dialect::MySql => " LOCK IN SHARE MODE",
                        _ => locking(" FOR SHARE"),
                    }
                )),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_names_its_tables_and_casts() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres, Dialect::MySql] {
            let sql = Statements::new(dialect, "lib.");
            assert!(sql.tally.text.as_str().contains("FROM lib.book_count"));
            let cast = if dialect == Dialect::MySql {
                "AS SIGNED"
            } else {
                "AS BIGINT"
            };
            assert!(sql.tally.text.as_str().contains(cast), "{dialect:?}");
            assert!(!sql.books.get.text.as_str().contains('{'), "{dialect:?}");
        }
    }
}
