//! The sqlx operations the store runs on a connection, written once over every database
//! sqlx drives that takes the store's values ([`Driver`], one blanket impl), so that code
//! generic over a [`Backend`](crate::Backend) states no sqlx bounds of its own.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sqlx::{AssertSqlSafe, Database, Encode, Executor, IntoArguments, SqlSafeStr, Type};

use crate::rows::StoreRow;
use crate::statement::{Arg, Statement};

/// What the store asks of a database's connections: a statement with its arguments, or
/// plain text, run to its rows.
pub trait Driver: Database<Row: StoreRow> + sqlx::database::HasStatementCache {
    /// Runs `statement` with `args` on `conn` (kept prepared if `persistent`).
    fn rows<'c>(
        conn: &'c mut Self::Connection,
        statement: &'c Statement,
        args: &'c [Arg<'c>],
        persistent: bool,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>>;

    /// Runs `text` (one statement or several, no arguments) on `conn`, with the simple
    /// protocol where the database has one.
    fn text_rows(
        conn: &mut Self::Connection,
        text: String,
    ) -> BoxFuture<'_, Result<Vec<Self::Row>, sqlx::Error>>;
}

impl<DB> Driver for DB
where
    DB: Database<Row: StoreRow> + sqlx::database::HasStatementCache,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'a> i64: Encode<'a, DB> + Type<DB>,
    for<'a> i32: Encode<'a, DB> + Type<DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
    for<'a> Option<&'a str>: Encode<'a, DB> + Type<DB>,
    for<'a> DateTime<Utc>: Encode<'a, DB> + Type<DB>,
    for<'a> &'a [u8]: Encode<'a, DB> + Type<DB>,
{
    fn rows<'c>(
        conn: &'c mut Self::Connection,
        statement: &'c Statement,
        args: &'c [Arg<'c>],
        persistent: bool,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>> {
        Box::pin(
            statement
                .query::<DB>(args)
                .persistent(persistent)
                .fetch_all(conn),
        )
    }

    fn text_rows(
        conn: &mut Self::Connection,
        text: String,
    ) -> BoxFuture<'_, Result<Vec<Self::Row>, sqlx::Error>> {
        // Safe: the store's own statements, every value in them written as digits or hex
        // (`statement::inline`).
        Box::pin(sqlx::raw_sql(AssertSqlSafe(text).into_sql_str()).fetch_all(conn))
    }
}
