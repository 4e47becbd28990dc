//! The writes that run inside a transaction a store opened, written once for every
//! database: creates with their keys' records, several creates in one transaction, and
//! conditional writes under row locks.

// Each store uses its own part of what is here: with its feature off, that part is unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]

use books_core::store::{BookRecord, Conditional, KeyedCreate, Precondition, StoreError};
use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::batch::{Created, NewBook};
use crate::queries::{book_args, key_args};
use crate::rows::StoreRow;
use crate::statement::{Arg, Statement};
use crate::statements::Statements;

/// The bounds of a database these writes run on.
macro_rules! transactions_for {
    ($(#[$meta:meta])* pub(crate) async fn $name:ident<DB>($($arg:ident: $ty:ty),* $(,)?) -> $out:ty $body:block) => {
        $(#[$meta])*
        pub(crate) async fn $name<DB>($($arg: $ty),*) -> $out
        where
            DB: sqlx::Database + sqlx::database::HasStatementCache,
            for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
            DB::Arguments: sqlx::IntoArguments<DB>,
            DB::Row: StoreRow,
            for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            for<'a> i32: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            for<'a> Option<String>: sqlx::Decode<'a, DB> + sqlx::Type<DB>,
            for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            for<'a> Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            for<'a> DateTime<Utc>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            for<'a> &'a [u8]: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            usize: sqlx::ColumnIndex<DB::Row>,
        $body
    };
}

transactions_for! {
    /// In a write transaction on `conn`: the book `new` names, and its key's record with
    /// it if it has a key. `Ok(Ok(Taken))`: an unexpired record for the key is there (roll
    /// the book back); `Ok(Err(_))`: the author is missing (the statement failed alone).
    pub(crate) async fn insert_in<DB>(
        conn: &mut DB::Connection,
        sql: &Statements,
        persistent: bool,
        new: &NewBook,
    ) -> Result<Created, sqlx::Error> {
        let insert = sql.create.query(&book_args(&new.book, new.now));
        let row = match insert.persistent(persistent).fetch_one(&mut *conn).await {
            Ok(row) => row,
            Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
                return Ok(Err(StoreError::AuthorNotFound(new.book.author_id)));
            }
            Err(e) => return Err(e),
        };
        let book: BookRecord = row.book()?.into();
        let kept = keep_key::<DB>(&mut *conn, sql, persistent, &book, new).await?;
        Ok(Ok(if kept {
            KeyedCreate::Created(book)
        } else {
            KeyedCreate::Taken
        }))
    }
}

transactions_for! {
    /// In the write transaction on `conn` that wrote `book` for `new` (a keyed create):
    /// keeps its key's record with the answer to `book`, unless an unexpired record for
    /// the key is there (`false`: roll the book back).
    pub(crate) async fn keep_key<DB>(
        conn: &mut DB::Connection,
        sql: &Statements,
        persistent: bool,
        book: &BookRecord,
        new: &NewBook,
    ) -> Result<bool, sqlx::Error> {
        let Some(key) = &new.key else {
            return Ok(true);
        };
        let answer = (key.answer)(book);
        let args = key_args(key, &answer, new.now);
        let Some(forget) = &sql.forget_key else {
            let kept = sql.keep_key.query(&args).persistent(persistent);
            return Ok(kept.fetch_optional(&mut *conn).await?.is_some());
        };
        // MariaDB: keep it; if one is there, forget it if it expired and keep again.
        match sql.keep_key.query(&args).execute(&mut *conn).await {
            Ok(_) => Ok(true),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                let forgotten = forget.query(&args).fetch_optional(&mut *conn).await?;
                if forgotten.is_some() {
                    sql.keep_key.query(&args).execute(&mut *conn).await?;
                }
                Ok(forgotten.is_some())
            }
            Err(e) => Err(e),
        }
    }
}

transactions_for! {
    /// Several creates in the transaction on `conn`, one row each: a failed statement (a
    /// missing author) is undone alone and the transaction goes on; a keyed create whose
    /// key turns out taken is undone alone too (a savepoint around it).
    pub(crate) async fn insert_all<DB>(
        conn: &mut DB::Connection,
        sql: &Statements,
        books: &[NewBook],
    ) -> Result<Vec<Created>, sqlx::Error> {
        let mut created = Vec::with_capacity(books.len());
        for new in books {
            let keyed = new.key.is_some();
            if keyed {
                sqlx::raw_sql("SAVEPOINT keyed").execute(&mut *conn).await?;
            }
            let outcome = insert_in::<DB>(&mut *conn, sql, true, new).await?;
            if keyed {
                if !matches!(outcome, Ok(KeyedCreate::Created(_))) {
                    sqlx::raw_sql("ROLLBACK TO SAVEPOINT keyed")
                        .execute(&mut *conn)
                        .await?;
                }
                sqlx::raw_sql("RELEASE SAVEPOINT keyed")
                    .execute(&mut *conn)
                    .await?;
            }
            created.push(outcome);
        }
        Ok(created)
    }
}

transactions_for! {
    /// The book `id` with its row locked for a conditional write, and its author's row
    /// locked against renames (the name shows in the book's answers), in the
    /// transaction on `conn`.
    pub(crate) async fn locked<DB>(
        conn: &mut DB::Connection,
        sql: &Statements,
        persistent: bool,
        id: i64,
    ) -> Result<Option<BookRecord>, sqlx::Error> {
        let row = sql
            .lock_book
            .query(&[Arg::Int(id)])
            .persistent(persistent)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut book: BookRecord = row.book()?.into();
        if let Some(author) = book.author_id {
            let row = sql
                .lock_author
                .query(&[Arg::Int(author)])
                .persistent(persistent)
                .fetch_optional(&mut *conn)
                .await?;
            book.author_name = row.map(|row| row.try_get(0usize)).transpose()?.flatten();
        }
        Ok(Some(book))
    }
}

transactions_for! {
    /// `write` (with `args`; `then`, a read after it, gives the rows where the write
    /// returns none) on the book `id` if `precondition` holds for it, in the transaction
    /// on `conn`, which holds the book's row (and its author's) from the check on: the
    /// written book's rows (`None`: no such book), or why not. The caller commits.
    pub(crate) async fn write_if<DB>(
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
        let mut rows = write
            .query(args)
            .persistent(persistent)
            .fetch_all(&mut *conn)
            .await?;
        if let Some(then) = then {
            rows = then
                .query(args)
                .persistent(persistent)
                .fetch_all(&mut *conn)
                .await?;
        }
        Ok(Conditional::Done(Some(rows)))
    }
}
