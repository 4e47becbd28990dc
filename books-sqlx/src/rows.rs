//! Rows as sqlx decodes them.

use books_core::store::{BookRecord, IdempotencyRecord, StoredAnswer};
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Row, Type};

/// A book as a query selects it under the API's column names (`id`, `title`, `year`,
/// `author_id`, `author_name`, `created_at`, `updated_at`; a store over other tables
/// writes `heading AS title` and the like), on any database: `sqlx::query_as::<_,
/// BookRow>` decodes it, `.into()` makes it a [`BookRecord`].
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run(pool: books_sqlx::sqlx::PgPool) -> Result<(), books_sqlx::Error> {
/// use books_core::store::BookRecord;
/// use books_sqlx::BookRow;
/// let row: Option<BookRow> = books_sqlx::sqlx::query_as(
///     "SELECT t.title_code AS id, t.heading AS title, t.released AS year, \
///      t.penned_by AS author_id, p.display_name AS author_name, \
///      t.inserted_at AS created_at, t.touched_at AS updated_at \
///      FROM press.titles t LEFT JOIN press.people p ON p.person_code = t.penned_by \
///      WHERE t.title_code = $1",
/// )
/// .bind(7_i64)
/// .fetch_optional(&pool)
/// .await?;
/// let book: Option<BookRecord> = row.map(Into::into);
/// # let _ = book; Ok(()) }
/// ```
#[derive(Debug)]
pub struct BookRow {
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

impl<'r, R: StoreRow> sqlx::FromRow<'r, R> for BookRow {
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        row.book()
    }
}

/// A book (or its absence: the statement reads the version whether the book exists) and
/// the version it was read at.
#[derive(Debug)]
pub struct VersionedRow {
    pub(crate) book: Option<BookRow>,
    pub(crate) version: i64,
}

/// A row of a page: the book and version, and the total from the counter, in one round
/// trip (one statement, so one snapshot).
#[derive(Debug)]
pub struct PageRow {
    book: BookRow,
    version: i64,
    total: i64,
}

/// This crate's rows, decoded from either database's rows by column name (prepared
/// statements answer in binary, PostgreSQL's simple protocol in text: sqlx decodes
/// both). Written out rather than derived: sqlx's `FromRow` derive needs its `macros`
/// feature, which builds the database drivers a second time for the compiler
/// (`cargo build --release --timings`).
pub trait StoreRow: Row {
    fn book(&self) -> Result<BookRow, sqlx::Error>;
    fn versioned(&self) -> Result<VersionedRow, sqlx::Error>;
    fn page(&self) -> Result<PageRow, sqlx::Error>;
    fn key_record(&self) -> Result<IdempotencyRecord, sqlx::Error>;
    /// The `BIGINT` in column `index`.
    fn int(&self, index: usize) -> Result<i64, sqlx::Error>;
    /// The `BIGINT` in the column named `name`.
    fn int_named(&self, name: &str) -> Result<i64, sqlx::Error>;
    /// The `BIGINT` or null in column `index`.
    fn maybe_int(&self, index: usize) -> Result<Option<i64>, sqlx::Error>;
    /// The boolean in column `index`.
    fn flag(&self, index: usize) -> Result<bool, sqlx::Error>;
    /// The text or null in column `index`.
    fn name(&self, index: usize) -> Result<Option<String>, sqlx::Error>;
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
        let id: Option<i64> = self.try_get("id")?;
        Ok(VersionedRow {
            book: id.map(|_| self.book()).transpose()?,
            version: self.try_get("version")?,
        })
    }
    fn page(&self) -> Result<PageRow, sqlx::Error> {
        Ok(PageRow {
            book: self.book()?,
            version: self.try_get("version")?,
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
    fn int_named(&self, name: &str) -> Result<i64, sqlx::Error> {
        self.try_get(name)
    }
    fn maybe_int(&self, index: usize) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(index)
    }
    fn flag(&self, index: usize) -> Result<bool, sqlx::Error> {
        self.try_get(index)
    }
    fn name(&self, index: usize) -> Result<Option<String>, sqlx::Error> {
        self.try_get(index)
    }
}

/// The books of a page and the total and version its rows carry (`None` for an empty
/// page).
pub(crate) fn page(rows: Vec<PageRow>) -> (Vec<BookRecord>, Option<(i64, i64)>) {
    let tally = rows.first().map(|page| (page.total, page.version));
    (
        rows.into_iter().map(|page| page.book.into()).collect(),
        tally,
    )
}
