//! Rows as sqlx decodes them, and the statements both stores share.

use books_core::{BookRecord, IdempotencyRecord, StoredAnswer};
use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, ColumnIndex, Decode, Row, SqlSafeStr, SqlStr, Type};

/// One row of the books-with-authors join.
#[derive(Debug)]
pub(crate) struct BookRow {
    id: i64,
    title: String,
    year: i32,
    author_id: Option<i64>,
    author_name: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<BookRow> for BookRecord {
    fn from(row: BookRow) -> Self {
        BookRecord {
            id: row.id,
            title: row.title,
            year: row.year,
            author_id: row.author_id,
            author_name: row.author_name,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// A book and the version it was read at.
#[derive(Debug)]
pub(crate) struct VersionedRow {
    pub(crate) book: BookRow,
    pub(crate) version: i64,
}

/// A row of a page: the book and version, and the total from the counter, in one round
/// trip (one statement, so one snapshot).
#[derive(Debug)]
pub(crate) struct PageRow {
    row: VersionedRow,
    total: i64,
}

/// This crate's rows, decoded from either database's rows by column name (prepared
/// statements answer in binary, PostgreSQL's simple protocol in text: sqlx decodes
/// both). Written out rather than derived: sqlx's `FromRow` derive needs its `macros`
/// feature, which builds the database drivers a second time for the compiler
/// (BENCHMARKS.md, "First build").
pub(crate) trait StoreRow: Row {
    fn book(&self) -> Result<BookRow, sqlx::Error>;
    fn versioned(&self) -> Result<VersionedRow, sqlx::Error>;
    fn page(&self) -> Result<PageRow, sqlx::Error>;
    fn key_record(&self) -> Result<IdempotencyRecord, sqlx::Error>;
    /// The `BIGINT` in column `index`.
    fn int(&self, index: usize) -> Result<i64, sqlx::Error>;
    /// The boolean in column `index`.
    fn flag(&self, index: usize) -> Result<bool, sqlx::Error>;
}

impl<R: Row> StoreRow for R
where
    for<'r> &'r str: ColumnIndex<R>,
    usize: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i32: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> DateTime<Utc>: Decode<'r, R::Database> + Type<R::Database>,
{
    fn book(&self) -> Result<BookRow, sqlx::Error> {
        Ok(BookRow {
            id: self.try_get("id")?,
            title: self.try_get("title")?,
            year: self.try_get("year")?,
            author_id: self.try_get("author_id")?,
            author_name: self.try_get("author_name")?,
            created_at: self.try_get("created_at")?,
            updated_at: self.try_get("updated_at")?,
        })
    }
    fn versioned(&self) -> Result<VersionedRow, sqlx::Error> {
        Ok(VersionedRow {
            book: self.book()?,
            version: self.try_get("version")?,
        })
    }
    fn page(&self) -> Result<PageRow, sqlx::Error> {
        Ok(PageRow {
            row: self.versioned()?,
            total: self.try_get("total")?,
        })
    }
    fn key_record(&self) -> Result<IdempotencyRecord, sqlx::Error> {
        let status: i32 = self.try_get("status")?;
        Ok(IdempotencyRecord {
            fingerprint: self.try_get("fingerprint")?,
            answer: StoredAnswer {
                status: u16::try_from(status).unwrap_or(0),
                content_type: self.try_get("content_type")?,
                location: self.try_get("location")?,
                etag: self.try_get("etag")?,
                body: self.try_get("body")?,
            },
        })
    }
    fn int(&self, index: usize) -> Result<i64, sqlx::Error> {
        self.try_get(index)
    }
    fn flag(&self, index: usize) -> Result<bool, sqlx::Error> {
        self.try_get(index)
    }
}

/// The books of a page and the total and version its rows carry (`None` for an empty
/// page).
pub(crate) fn page(rows: Vec<PageRow>) -> (Vec<BookRecord>, Option<(i64, i64)>) {
    let tally = rows.first().map(|page| (page.total, page.row.version));
    (
        rows.into_iter().map(|page| page.row.book.into()).collect(),
        tally,
    )
}

/// The page's total and version columns, summed over the counter's slots.
macro_rules! tally {
    () => {
        ", (SELECT CAST(SUM(n) AS BIGINT) FROM {s}book_count) AS total, \
         (SELECT CAST(SUM(version) AS BIGINT) FROM {s}book_count) AS version "
    };
}

/// The join's columns, in [`BookRow`]'s names.
macro_rules! select_books {
    ($($rest:expr),+ $(,)?) => {
        concat!(
            "SELECT b.id, b.title, b.year, b.author_id, a.name AS author_name, \
             b.created_at, b.updated_at",
            $($rest),+
        )
    };
}

/// A written book as [`BookRow`], in the write's own round trip (SQLite's `RETURNING`
/// takes no table alias; `books` names the written row on both databases).
macro_rules! returning_book {
    () => {
        "RETURNING id, title, year, author_id, \
         (SELECT a.name FROM {s}authors a WHERE a.id = books.author_id) AS author_name, \
         created_at, updated_at"
    };
}

/// Several books in one statement on PostgreSQL, from arrays of titles, author ids,
/// years and timestamps; a book whose author does not exist is not written (nor
/// returned). One statement, so the insert trigger runs once for all of them. Ids come
/// from the identity column, so the role needs no rights on its sequence.
#[cfg(feature = "postgres")]
const CREATE_MANY_POSTGRES: &str = "\
    WITH written AS ( \
        INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
        SELECT t.title, t.author_id, t.year, t.at, t.at \
        FROM unnest($1::text[], $2::int8[], $3::int4[], $4::timestamptz[]) \
             AS t(title, author_id, year, at) \
        WHERE EXISTS (SELECT 1 FROM {s}authors a WHERE a.id = t.author_id) \
        RETURNING id, title, year, author_id, created_at, updated_at) \
    SELECT w.id, w.title, w.year, w.author_id, a.name AS author_name, w.created_at, \
           w.updated_at \
    FROM written w LEFT JOIN {s}authors a ON a.id = w.author_id ORDER BY w.id";

/// The list on SQLite: its table is its id b-tree, so a plain `LIMIT … OFFSET` is best.
#[cfg(feature = "sqlite")]
pub(crate) const LIST_SQLITE: &str = select_books!(
    tally!(),
    "FROM {s}books b LEFT JOIN {s}authors a ON a.id = b.author_id \
     ORDER BY b.id LIMIT $1 OFFSET $2"
);

/// The list on PostgreSQL, as a deferred join: a deep OFFSET walks the primary-key index
/// only, then the page's ids are joined (page 40,000 of 1M books: 1.6 s before, ~0.1 s
/// after; BENCHMARKS.md). On SQLite the rewrite gains nothing and defeats its LIMIT
/// optimisation.
#[cfg(feature = "postgres")]
pub(crate) const LIST_POSTGRES: &str = select_books!(
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
/// Counts may sit in several slots per group or range (PostgreSQL), hence the sums.
macro_rules! start_of_page {
    () => {
        "WITH g AS (SELECT grp, SUM(n) AS n, \
                    CAST(SUM(SUM(n)) OVER (ORDER BY grp ROWS UNBOUNDED PRECEDING) AS BIGINT) \
                    AS upto FROM {s}book_groups GROUP BY grp), \
         sg AS (SELECT grp, $2 - (upto - n) AS skip FROM g WHERE upto > $2 \
                ORDER BY grp LIMIT 1), \
         r AS (SELECT bucket, SUM(n) AS n, \
                    CAST(SUM(SUM(n)) OVER (ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS BIGINT) \
                    AS upto FROM {s}book_ranges \
                    WHERE bucket >= (SELECT grp * 32 FROM sg) \
                      AND bucket < (SELECT grp * 32 + 32 FROM sg) GROUP BY bucket), \
         s AS (SELECT bucket, (SELECT skip FROM sg) - (upto - n) AS skip FROM r \
               WHERE upto > (SELECT skip FROM sg) ORDER BY bucket LIMIT 1) "
    };
}

/// A deep page, on both databases: a deferred join (the skip walks ids only, then the
/// page's ids are joined) from the first id of the page's range. On SQLite it is ≈ 10%
/// faster than skipping joined rows (page 50,000 of 1M).
pub(crate) const DEEP: &str = concat!(
    start_of_page!(),
    select_books!(
        tally!(),
        "FROM (SELECT id FROM {s}books WHERE id >= (SELECT bucket * 1024 FROM s) \
               ORDER BY id LIMIT $1 OFFSET COALESCE((SELECT skip FROM s), 0)) p \
         JOIN {s}books b ON b.id = p.id LEFT JOIN {s}authors a ON a.id = b.author_id \
         ORDER BY b.id"
    )
);

/// The statements of one store, its tables qualified once at construction (a schema on
/// PostgreSQL, nothing on SQLite). sqlx's SQLite driver takes `$N` placeholders too, so
/// both databases share the text.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) list: SqlStr,
    /// The list from [`RANGE`] books on.
    pub(crate) deep: SqlStr,
    /// The total and the version, for an empty page.
    pub(crate) tally: SqlStr,
    pub(crate) get: SqlStr,
    pub(crate) create: SqlStr,
    /// PostgreSQL's create of several books.
    #[cfg(feature = "postgres")]
    pub(crate) create_many: SqlStr,
    pub(crate) update: SqlStr,
    pub(crate) delete: SqlStr,
    pub(crate) author_exists: SqlStr,
    pub(crate) add_author: SqlStr,
    pub(crate) remove_author: SqlStr,
    pub(crate) upsert_author: SqlStr,
    /// An idempotency key's record, unless expired (`$2`: now).
    pub(crate) key_record: SqlStr,
    /// Keeps a key's record unless an unexpired one is there (returns the key if kept).
    pub(crate) keep_key: SqlStr,
    /// Forgets at most `$2` records expired at `$1`.
    pub(crate) forget_keys: SqlStr,
    /// PostgreSQL: a book's row, locked for a conditional write (its author's name is
    /// read apart, locked with [`lock_author`](Self::lock_author)).
    #[cfg(feature = "postgres")]
    pub(crate) lock_book: SqlStr,
    /// PostgreSQL: an author's name, its row locked against renames until the write
    /// commits.
    #[cfg(feature = "postgres")]
    pub(crate) lock_author: SqlStr,
}

impl Statements {
    /// `list` is the dialect's list; `schema` is put before every table name (`""`, or a
    /// checked identifier and a dot).
    pub(crate) fn new(list: &'static str, schema: &str) -> Self {
        // Safe: `schema` is empty or an identifier checked by the store.
        let sql = |template: &str| AssertSqlSafe(template.replace("{s}", schema)).into_sql_str();
        Self {
            list: sql(list),
            deep: sql(DEEP),
            tally: sql(
                "SELECT CAST(SUM(n) AS BIGINT), CAST(SUM(version) AS BIGINT) FROM {s}book_count",
            ),
            get: sql(select_books!(
                ", (SELECT CAST(SUM(version) AS BIGINT) FROM {s}book_count) AS version \
                 FROM {s}books b LEFT JOIN {s}authors a ON a.id = b.author_id WHERE b.id = $1"
            )),
            create: sql(concat!(
                "INSERT INTO {s}books (title, author_id, year, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $4) ",
                returning_book!()
            )),
            #[cfg(feature = "postgres")]
            create_many: sql(CREATE_MANY_POSTGRES),
            update: sql(concat!(
                "UPDATE {s}books SET title = $1, author_id = $2, year = $3, \
                 updated_at = $4 WHERE id = $5 ",
                returning_book!()
            )),
            delete: sql("DELETE FROM {s}books WHERE id = $1 RETURNING id"),
            author_exists: sql("SELECT EXISTS (SELECT 1 FROM {s}authors WHERE id = $1)"),
            add_author: sql("INSERT INTO {s}authors (name) VALUES ($1) RETURNING id"),
            remove_author: sql("DELETE FROM {s}authors WHERE id = $1 RETURNING id"),
            upsert_author: sql("INSERT INTO {s}authors (id, name) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name"),
            key_record: sql(
                "SELECT fingerprint, status, content_type, location, etag, body \
                 FROM {s}idempotency_keys WHERE key = $1 AND expires_at > $2",
            ),
            keep_key: sql(
                "INSERT INTO {s}idempotency_keys AS k (key, fingerprint, status, content_type, \
                 location, etag, body, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, \
                 status = excluded.status, content_type = excluded.content_type, \
                 location = excluded.location, etag = excluded.etag, body = excluded.body, \
                 expires_at = excluded.expires_at WHERE k.expires_at <= $9 RETURNING key",
            ),
            forget_keys: sql("DELETE FROM {s}idempotency_keys WHERE key IN (SELECT key \
                 FROM {s}idempotency_keys WHERE expires_at <= $1 LIMIT $2) RETURNING key"),
            #[cfg(feature = "postgres")]
            lock_book: sql(
                "SELECT id, title, year, author_id, CAST(NULL AS TEXT) AS author_name, \
                 created_at, updated_at FROM {s}books WHERE id = $1 FOR UPDATE",
            ),
            #[cfg(feature = "postgres")]
            lock_author: sql("SELECT name FROM {s}authors WHERE id = $1 FOR SHARE"),
        }
    }
}

/// The version check's statement for tables behind `schema` (see [`Statements::new`]), in
/// one snapshot: the version, `changes`, the total, the greatest id, how many books have
/// an id greater than `above`, and `position`, an SQL expression of type `BIGINT` (the
/// primary's WAL position, or a null). `above` and `last` are parameters or literals:
/// when the version is still `last` (the previous check's, which read the tally with the
/// same `above`), the greatest id and the count come back null, unread (the tally is the
/// previous one: the version moves with every write), which spares cached reads between
/// writes two index scans per check (BENCHMARKS.md, "Issue 23").
pub(crate) fn check_sql(schema: &str, position: &str, above: &str, last: &str) -> String {
    format!(
        "SELECT v, c, n, \
         CASE WHEN v = {last} THEN NULL ELSE (SELECT COALESCE(MAX(id), 0) FROM {schema}books) END, \
         CASE WHEN v = {last} THEN NULL ELSE (SELECT COUNT(*) FROM {schema}books WHERE id > {above}) END, \
         {position} \
         FROM (SELECT CAST(SUM(version) AS BIGINT) AS v, CAST(SUM(changes) AS BIGINT) AS c, \
         CAST(SUM(n) AS BIGINT) AS n FROM {schema}book_count) AS t"
    )
}

/// No position: a `BIGINT` null.
pub(crate) const NO_POSITION: &str = "CAST(NULL AS BIGINT)";
