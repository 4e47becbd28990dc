//! The writes that run inside a transaction a store opened, written once for every
//! database: creates with their keys' records, several creates in one transaction, and
//! conditional writes under row locks.

use books_core::store::{BookRecord, Conditional, KeyedCreate, Precondition, StoreError};

use crate::batch::{Created, NewBook};
use crate::driver::Driver;
use crate::queries::book_args;
use crate::rows::StoreRow;
use crate::statement::{Arg, Statement};
use crate::store_sql::Statements;

/// In a write transaction on `conn`: the book `new` names, and its key's record with
/// it if it has a key. `Ok(Ok(Taken))`: an unexpired record for the key is there (roll
/// the book back); `Ok(Err(_))`: the author is missing (the statement failed alone).
pub(crate) async fn insert_in<DB: Driver>(
    conn: &mut DB::Connection,
    sql: &Statements,
    persistent: bool,
    new: &NewBook,
) -> Result<Created, sqlx::Error> {
    let args = book_args(&new.book, new.now);
    let rows = match DB::rows(&mut *conn, &sql.books.create, &args, persistent).await {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
            return Ok(Err(StoreError::AuthorNotFound(new.book.author_id)));
        }
        Err(e) => return Err(e),
    };
    let row = rows.first().ok_or(sqlx::Error::RowNotFound)?;
    let book: BookRecord = row.book()?.into();
    let kept = keep_key::<DB>(&mut *conn, sql, persistent, &book, new).await?;
    Ok(Ok(if kept {
        KeyedCreate::Created(book)
    } else {
        KeyedCreate::Taken
    }))
}

/// In the write transaction on `conn` that wrote `book` for `new` (a keyed create):
/// keeps its key's record with the answer to `book`, unless an unexpired record for
/// the key is there (`false`: roll the book back).
pub(crate) async fn keep_key<DB: Driver>(
    conn: &mut DB::Connection,
    sql: &Statements,
    persistent: bool,
    book: &BookRecord,
    new: &NewBook,
) -> Result<bool, sqlx::Error> {
    let Some(key) = &new.key else {
        return Ok(true);
    };
    crate::key_sql::keep::<DB>(conn, &sql.keys, persistent, (key, book, new.now)).await
}

/// The book `id` with its row locked for a conditional write, and its author's row
/// locked against renames (the name shows in the book's answers), in the
/// transaction on `conn`.
pub(crate) async fn locked<DB: Driver>(
    conn: &mut DB::Connection,
    sql: &Statements,
    persistent: bool,
    id: i64,
) -> Result<Option<BookRecord>, sqlx::Error> {
    let args = [Arg::Int(id)];
    let rows = DB::rows(&mut *conn, &sql.locks[0], &args, persistent).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let mut book: BookRecord = row.book()?.into();
    if let Some(author) = book.author_id {
        let args = [Arg::Int(author)];
        let rows = DB::rows(&mut *conn, &sql.locks[1], &args, persistent).await?;
        book.author_name = rows.first().map(|row| row.name(0)).transpose()?.flatten();
    }
    Ok(Some(book))
}

/// `write` (with `args`; `then`, a read after it, gives the rows where the write
/// returns none) on the book `id` if `precondition` holds for it, in the transaction
/// on `conn`, which holds the book's row (and its author's) from the check on: the
/// written book's rows (`None`: no such book), or why not. The caller commits.
pub(crate) async fn write_if<DB: Driver>(
    conn: &mut DB::Connection,
    sql: &Statements,
    persistent: bool,
    id: i64,
    precondition: Precondition<'_>,
    write: (&Statement, Option<&Statement>),
    args: &[Arg<'_>],
) -> Result<Conditional<Option<Vec<DB::Row>>>, sqlx::Error> {
    match locked::<DB>(&mut *conn, sql, persistent, id).await? {
        None => return Ok(Conditional::Done(None)),
        Some(current) if !precondition(&current) => {
            return Ok(Conditional::Refused(current));
        }
        Some(_) => {}
    }
    let (write, then) = write;
    let mut rows = DB::rows(&mut *conn, write, args, persistent).await?;
    if let Some(then) = then {
        rows = DB::rows(&mut *conn, then, args, persistent).await?;
    }
    Ok(Conditional::Done(Some(rows)))
}
