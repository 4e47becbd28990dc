//! The reads of a store over a host's own tables ([`BookTables`]): a book, a page and its
//! filtered total, a book locked for a conditional write, and the transaction that makes
//! a page and its total one snapshot ([`snapshot`]), each written from the host's column
//! names for its database.

use std::marker::PhantomData;

use books_core::store::{BookPage, BookRecord, ListQuery};

use crate::Error;
use crate::backend::Backend;
use crate::list_sql::{BookColumns, ListClauses, ListValue};
use crate::rows::StoreRow;
use crate::statement::{Arg, Dialect, Statement};

/// A host's authors table and its columns, as SQL expressions (`writers w`,
/// `w.writer_no`, `w.full_name`).
#[derive(Debug, Clone, Copy)]
pub struct AuthorColumns<'a> {
    /// The table, with the alias the columns use.
    pub table: &'a str,
    /// The author's id.
    pub id: &'a str,
    /// The author's name (null reads as a nameless author).
    pub name: &'a str,
}

/// A host's books and authors tables, and the reads a store makes over them, written for
/// the database `DB`: every book with its author's name (a `LEFT JOIN`: a book without
/// an author, or whose author is gone, reads with none), in the API's names. Values are
/// always bound; the table and column names are written in as given (the host's own
/// SQL, never a client's). Ids decode as 64-bit integers, the year as a 32-bit one and
/// times as instants in UTC: give a column of another type, or one that may hold null,
/// through an expression (`CAST(…)`, `COALESCE(…)`). Statements are kept prepared on
/// their connections, as sqlx's own are by default.
///
/// ```no_run
/// # #[cfg(feature = "mysql")]
/// # async fn run(pool: books_sqlx::sqlx::MySqlPool, query: books_core::store::ListQuery)
/// #     -> Result<(), books_sqlx::Error> {
/// use books_sqlx::{AuthorColumns, BookColumns, BookTables};
/// use books_sqlx::sqlx::MySql;
/// let tables = BookTables::<MySql>::new(
///     "catalog.items i",
///     BookColumns {
///         id: "i.item_no", title: "i.label", year: "i.pub_year", author_id: "i.creator_no",
///         created_at: "i.ins_ts", updated_at: "i.upd_ts", folded_title: None,
///     },
///     AuthorColumns { table: "catalog.creators c", id: "c.creator_no", name: "c.display_name" },
/// );
/// let mut tx = books_sqlx::snapshot(&pool).await?; // the page and its total agree
/// let page = tables.page(&mut tx, &query).await?;
/// # let _ = page; Ok(()) }
/// ```
#[derive(Debug)]
pub struct BookTables<DB: Backend> {
    database: PhantomData<fn() -> DB>,
    books: &'static str,
    columns: BookColumns<'static>,
    /// Every book with its author's name, without a `WHERE`.
    select: String,
    /// The book `$1`; the book `$1` locked (its author's name left null); the author
    /// `$1`'s name, locked.
    statements: [Statement; 3],
}

impl<DB: Backend> Clone for BookTables<DB> {
    fn clone(&self) -> Self {
        Self {
            database: PhantomData,
            books: self.books,
            columns: self.columns,
            select: self.select.clone(),
            statements: self.statements.clone(),
        }
    }
}

impl<DB: Backend> BookTables<DB> {
    /// The reads over `books` (the table, with the alias `columns` use) and `authors`.
    pub fn new(
        books: &'static str,
        columns: BookColumns<'static>,
        authors: AuthorColumns<'static>,
    ) -> Self {
        let dialect = DB::DIALECT;
        let c = &columns;
        let fields = |name: &str| {
            format!(
                "{} AS id, {} AS title, {} AS year, {} AS author_id, {name} AS author_name, \
                 {} AS created_at, {} AS updated_at",
                c.id, c.title, c.year, c.author_id, c.created_at, c.updated_at
            )
        };
        let select = format!(
            "SELECT {} FROM {books} LEFT JOIN {} ON {} = {}",
            fields(authors.name),
            authors.table,
            authors.id,
            c.author_id
        );
        // SQLite has no row locks: a conditional write holds the database's write lock
        // from its transaction's start (`BEGIN IMMEDIATE`).
        let (update, share) = match dialect {
            Dialect::Sqlite => ("", ""),
            Dialect::Postgres => (" FOR UPDATE", " FOR SHARE"),
            Dialect::MySql => (" FOR UPDATE", " LOCK IN SHARE MODE"),
        };
        let null = match dialect {
            Dialect::Postgres => "CAST(NULL AS TEXT)",
            _ => "NULL",
        };
        let sql = |text: String| Statement::new(&text, "", dialect);
        let statements = [
            sql(format!("{select} WHERE {} = $1", c.id)),
            sql(format!(
                "SELECT {} FROM {books} WHERE {} = $1{update}",
                fields(null),
                c.id
            )),
            sql(format!(
                "SELECT {} FROM {} WHERE {} = $1{share}",
                authors.name, authors.table, authors.id
            )),
        ];
        Self {
            database: PhantomData,
            books,
            columns,
            select,
            statements,
        }
    }

    /// The book `id` on `conn`.
    pub async fn book(
        &self,
        conn: &mut DB::Connection,
        id: i64,
    ) -> Result<Option<BookRecord>, Error> {
        let rows = DB::rows(conn, &self.statements[0], &[Arg::Int(id)], true).await?;
        Ok(rows.first().map(book).transpose()?)
    }

    /// The page `query` asks for and the total its filter keeps, both over the same
    /// [`ListClauses`], on `conn`: in a [`snapshot`] they agree.
    pub async fn page(
        &self,
        conn: &mut DB::Connection,
        query: &ListQuery,
    ) -> Result<BookPage, Error> {
        let clauses = ListClauses::written(DB::DIALECT, &self.columns, query, 3, None, false);
        let filter = clauses.condition.as_deref().unwrap_or("1 = 1");
        let (select, books, order) = (&self.select, self.books, &clauses.order);
        let mut values = vec![
            ListValue::Int(i64::from(query.limit)),
            ListValue::Int(i64::try_from(query.offset).unwrap_or(i64::MAX)),
        ];
        values.extend(clauses.values);
        let args: Vec<Arg<'_>> = values.iter().map(ListValue::arg).collect();
        // Numbered `$N`, the limit's two first; MariaDB's `?` bind them in their order.
        let numbered = |text: String| Statement::new(&text, "", DB::DIALECT).planned_per_run();
        let page = numbered(format!(
            "{select} WHERE {filter} ORDER BY {order} LIMIT $1 OFFSET $2"
        ));
        let count = numbered(format!("SELECT COUNT(*) FROM {books} WHERE {filter}"));
        let rows = DB::rows(&mut *conn, &page, &args, false).await?;
        let books = rows.iter().map(book).collect::<Result<_, _>>()?;
        let total = DB::rows(&mut *conn, &count, &args, false).await?;
        let total = total.first().ok_or(sqlx::Error::RowNotFound)?.int(0)?;
        Ok(BookPage {
            books,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    /// In the transaction on `conn`, for a conditional write: the book `id` with its row
    /// locked against other writes, and its author's row locked against renames (the
    /// name is in the book's `ETag`), until the transaction ends. (On SQLite, begin the
    /// transaction with `BEGIN IMMEDIATE`: the database's write lock holds it all.)
    pub async fn locked(
        &self,
        conn: &mut DB::Connection,
        id: i64,
    ) -> Result<Option<BookRecord>, Error> {
        let rows = DB::rows(&mut *conn, &self.statements[1], &[Arg::Int(id)], true).await?;
        let Some(mut current) = rows.first().map(book).transpose()? else {
            return Ok(None);
        };
        if let Some(author) = current.author_id {
            let name = DB::rows(conn, &self.statements[2], &[Arg::Int(author)], true).await?;
            current.author_name = name.first().map(|row| row.name(0)).transpose()?.flatten();
        }
        Ok(Some(current))
    }
}

/// A transaction on `pool` whose reads see one snapshot of the database, for a page and
/// its total: PostgreSQL's `REPEATABLE READ` (its default `READ COMMITTED` takes one per
/// statement), MariaDB's `WITH CONSISTENT SNAPSHOT` (one snapshot under its default
/// `REPEATABLE READ`, not on a server set to `READ COMMITTED`), SQLite's plain `BEGIN`.
pub async fn snapshot<DB: Backend>(
    pool: &sqlx::Pool<DB>,
) -> Result<sqlx::Transaction<'static, DB>, Error> {
    let begin = match DB::DIALECT {
        Dialect::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        Dialect::MySql => "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        Dialect::Sqlite => "BEGIN",
    };
    Ok(pool.begin_with(begin).await?)
}

/// A row of the API's names as a record.
fn book<R: StoreRow>(row: &R) -> Result<BookRecord, sqlx::Error> {
    Ok(row.book()?.into())
}
