//! The book store's operations, written once over a store's way of running a statement
//! ([`Run`]): which pool, which protocol, whether a read may go to a replica. A store's
//! own file holds only what differs between the databases.

use std::future::Future;

use books_core::{
    BookInput, BookPage, BookRecord, IdempotencyKey, IdempotencyRecord, KeyedCreate, StoreError,
    StoredAnswer,
};
use chrono::{DateTime, Utc};
use sqlx::SqlStr;

use crate::batch::{Created, NewBook};
use crate::error::OrStoreError;
use crate::rows::{RANGE, Statements, StoreRow, page};

/// A value bound to a statement.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Int4(i32),
    Text(&'a str),
    Name(Option<&'a str>),
    Time(DateTime<Utc>),
    Blob(&'a [u8]),
}

/// Where a read may be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// The data a client asked for (a page, a book): a replica may answer, as long as it
    /// has every write the primary had when the read began.
    Data,
    /// What decides a write or must be current by itself: the primary.
    Primary,
}

/// How a store runs one statement and hands back its rows.
pub(crate) trait Run: Send + Sync {
    type Row: StoreRow;

    /// The store's statements.
    fn sql(&self) -> &Statements;

    /// Runs a read; its errors are already the store contract's.
    fn read(
        &self,
        to: Read,
        sql: &SqlStr,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send;

    /// Runs a write (with `RETURNING`, so rows say what was written).
    fn write(
        &self,
        sql: &SqlStr,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send;
}

fn decoded<T>(result: Result<T, sqlx::Error>) -> Result<T, StoreError> {
    result.or_store_error()
}

/// [`BookStore::list`](books_core::BookStore::list): a page and, for an empty one, the
/// total and version by themselves.
pub(crate) async fn list(
    store: &impl Run,
    offset: u64,
    limit: u32,
) -> Result<BookPage, StoreError> {
    let sql = store.sql();
    // Past the first range, start from the page's range (`book_ranges`).
    let statement = if offset < RANGE { &sql.list } else { &sql.deep };
    let args = [
        Arg::Int(i64::from(limit)),
        Arg::Int(i64::try_from(offset).unwrap_or(i64::MAX)),
    ];
    let rows = store.read(Read::Data, statement, &args).await?;
    let rows = decoded(rows.iter().map(StoreRow::page).collect())?;
    let (books, tally) = page(rows);
    let (total, version) = match tally {
        Some(tally) => tally,
        None => {
            let rows = store.read(Read::Primary, &sql.tally, &[]).await?;
            let row = first(&rows)?;
            (decoded(row.int(0))?, decoded(row.int(1))?)
        }
    };
    Ok(BookPage {
        books,
        total: total as u64,
        version: Some(version as u64),
    })
}

/// [`BookStore::get_versioned`](books_core::BookStore::get_versioned).
pub(crate) async fn get(
    store: &impl Run,
    id: i64,
) -> Result<(Option<BookRecord>, Option<u64>), StoreError> {
    let rows = store
        .read(Read::Data, &store.sql().get, &[Arg::Int(id)])
        .await?;
    Ok(match rows.first() {
        Some(row) => {
            let row = decoded(row.versioned())?;
            (Some(row.book.into()), Some(row.version as u64))
        }
        None => (None, None),
    })
}

/// One create without a key, in one statement.
pub(crate) async fn create(store: &impl Run, new: &NewBook) -> Created {
    let book = &new.book;
    let rows = store
        .write(&store.sql().create, &book_args(book, new.now))
        .await
        .or_write_error(book.author_id)?;
    Ok(KeyedCreate::Created(decoded(first(&rows)?.book())?.into()))
}

/// The book of a create without a key.
pub(crate) fn book_of(created: Created) -> Result<BookRecord, StoreError> {
    match created? {
        KeyedCreate::Created(book) => Ok(book),
        _ => Err(StoreError::other("a create without a key found it taken")),
    }
}

/// In a write transaction on `conn`: the book `new` names, and its key's record with it
/// if it has a key. `Ok(Ok(Taken))`: an unexpired record for the key is there (roll the
/// book back); `Ok(Err(_))`: the author is missing (the statement failed alone).
pub(crate) async fn insert_in<DB>(
    conn: &mut DB::Connection,
    sql: &Statements,
    persistent: bool,
    new: &NewBook,
) -> Result<Created, sqlx::Error>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    DB::Row: StoreRow,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i32: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> DateTime<Utc>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> &'a [u8]: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let insert = bind(
        sqlx::query(sql.create.clone()),
        &book_args(&new.book, new.now),
    );
    let row = match insert.persistent(persistent).fetch_one(&mut *conn).await {
        Ok(row) => row,
        Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
            return Ok(Err(StoreError::AuthorNotFound(new.book.author_id)));
        }
        Err(e) => return Err(e),
    };
    let book: BookRecord = row.book()?.into();
    let Some(key) = &new.key else {
        return Ok(Ok(KeyedCreate::Created(book)));
    };
    let answer = (key.answer)(&book);
    let kept = bind(
        sqlx::query(sql.keep_key.clone()),
        &key_args(key, &answer, new.now),
    )
    .persistent(persistent)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(Ok(match kept {
        Some(_) => KeyedCreate::Created(book),
        None => KeyedCreate::Taken,
    }))
}

/// [`BookStore::idempotency_record`](books_core::BookStore::idempotency_record), on the
/// primary.
pub(crate) async fn key_record(
    store: &impl Run,
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<IdempotencyRecord>, StoreError> {
    let args = [Arg::Text(key), Arg::Time(now)];
    let rows = store
        .read(Read::Primary, &store.sql().key_record, &args)
        .await?;
    rows.first()
        .map(|row| decoded(row.key_record()))
        .transpose()
}

/// [`BookStore::forget_expired_keys`](books_core::BookStore::forget_expired_keys).
pub(crate) async fn forget_keys(
    store: &impl Run,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<u64, StoreError> {
    let args = [Arg::Time(now), Arg::Int(i64::from(limit))];
    let rows = store.write(&store.sql().forget_keys, &args).await;
    Ok(rows.or_store_error()?.len() as u64)
}

/// The arguments that keep `key`'s record for the answer to `book` (`now`: records that
/// expired by then are replaced).
pub(crate) fn key_args<'a>(
    key: &'a IdempotencyKey,
    answer: &'a StoredAnswer,
    now: DateTime<Utc>,
) -> [Arg<'a>; 9] {
    [
        Arg::Text(&key.key),
        Arg::Blob(&key.fingerprint),
        Arg::Int4(i32::from(answer.status)),
        Arg::Text(&answer.content_type),
        Arg::Text(&answer.location),
        Arg::Text(&answer.etag),
        Arg::Blob(&answer.body),
        Arg::Time(key.expires_at),
        Arg::Time(now),
    ]
}

/// [`BookStore::update`](books_core::BookStore::update).
pub(crate) async fn update(
    store: &impl Run,
    id: i64,
    book: &BookInput,
    now: DateTime<Utc>,
) -> Result<Option<BookRecord>, StoreError> {
    let [title, author, year, now] = book_args(book, now);
    let rows = store
        .write(
            &store.sql().update,
            &[title, author, year, now, Arg::Int(id)],
        )
        .await
        .or_write_error(book.author_id)?;
    rows.first()
        .map(|row| decoded(row.book()).map(Into::into))
        .transpose()
}

/// [`BookStore::delete`](books_core::BookStore::delete).
pub(crate) async fn delete(store: &impl Run, id: i64) -> Result<bool, StoreError> {
    let rows = store.write(&store.sql().delete, &[Arg::Int(id)]).await;
    Ok(!rows.or_store_error()?.is_empty())
}

/// [`BookStore::author_exists`](books_core::BookStore::author_exists), on the primary: a
/// write's validation must see the author a moment-old write added.
pub(crate) async fn author_exists(store: &impl Run, id: i64) -> Result<bool, StoreError> {
    let rows = store
        .read(Read::Primary, &store.sql().author_exists, &[Arg::Int(id)])
        .await?;
    decoded(first(&rows)?.flag(0))
}

/// [`AuthorStore::add_author`](books_core::AuthorStore::add_author).
pub(crate) async fn add_author(store: &impl Run, name: Option<&str>) -> Result<i64, StoreError> {
    let rows = store
        .write(&store.sql().add_author, &[Arg::Name(name)])
        .await;
    decoded(first(&rows.or_store_error()?)?.int(0))
}

/// [`AuthorStore::remove_author`](books_core::AuthorStore::remove_author).
pub(crate) async fn remove_author(store: &impl Run, id: i64) -> Result<bool, StoreError> {
    let rows = store
        .write(&store.sql().remove_author, &[Arg::Int(id)])
        .await;
    Ok(!rows.or_store_error()?.is_empty())
}

/// Title, author, year and time: a create's arguments, and the first four of an update's.
pub(crate) fn book_args(book: &BookInput, now: DateTime<Utc>) -> [Arg<'_>; 4] {
    [
        Arg::Text(&book.title),
        Arg::Int(book.author_id),
        Arg::Int4(book.year),
        Arg::Time(now),
    ]
}

/// The one row a statement always returns.
fn first<R>(rows: &[R]) -> Result<&R, StoreError> {
    rows.first()
        .ok_or_else(|| StoreError::other("a statement returned no row"))
}

/// `query` with `args` bound in order.
pub(crate) fn bind<'q, 'a, DB>(
    mut query: sqlx::query::Query<'q, DB, DB::Arguments>,
    args: &[Arg<'a>],
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    DB: sqlx::Database,
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    i32: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    DateTime<Utc>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a [u8]: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    for arg in args {
        query = match *arg {
            Arg::Int(value) => query.bind(value),
            Arg::Int4(value) => query.bind(value),
            Arg::Text(value) => query.bind(value),
            Arg::Name(value) => query.bind(value),
            Arg::Time(value) => query.bind(value),
            Arg::Blob(value) => query.bind(value),
        };
    }
    query
}

/// `impl BookStore` and `impl AuthorStore` for a SQL store (a [`Run`] with a `creates`
/// queue): every operation above, and the store's own methods (`$own`: its version,
/// its conditional writes, and whatever else differs).
macro_rules! sql_store {
    ($store:ty { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl books_core::BookStore for $store {
            async fn list(&self, offset: u64, limit: u32) -> Result<books_core::BookPage, books_core::StoreError> {
                $crate::queries::list(self, offset, limit).await
            }

            async fn get(&self, id: i64) -> Result<Option<books_core::BookRecord>, books_core::StoreError> {
                Ok($crate::queries::get(self, id).await?.0)
            }

            async fn get_versioned(
                &self,
                id: i64,
            ) -> Result<(Option<books_core::BookRecord>, Option<u64>), books_core::StoreError> {
                $crate::queries::get(self, id).await
            }

            /// Creates that arrive while another is written go together (group commit:
            /// the README's "Creates commit together").
            async fn create(
                &self,
                book: &books_core::BookInput,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<books_core::BookRecord, books_core::StoreError> {
                let book = $crate::batch::NewBook { book: book.clone(), now, key: None };
                $crate::queries::book_of(self.creates.create(self, book).await)
            }

            /// Written together with other creates, each with its key's record.
            async fn create_keyed(
                &self,
                book: &books_core::BookInput,
                now: chrono::DateTime<chrono::Utc>,
                key: &books_core::IdempotencyKey,
            ) -> Result<books_core::KeyedCreate, books_core::StoreError> {
                let book = $crate::batch::NewBook { book: book.clone(), now, key: Some(key.clone()) };
                self.creates.create(self, book).await
            }

            async fn update(
                &self,
                id: i64,
                book: &books_core::BookInput,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<books_core::BookRecord>, books_core::StoreError> {
                $crate::queries::update(self, id, book, now).await
            }

            async fn delete(&self, id: i64) -> Result<bool, books_core::StoreError> {
                $crate::queries::delete(self, id).await
            }

            async fn author_exists(&self, id: i64) -> Result<bool, books_core::StoreError> {
                $crate::queries::author_exists(self, id).await
            }

            async fn idempotency_record(
                &self,
                key: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<books_core::IdempotencyRecord>, books_core::StoreError> {
                $crate::queries::key_record(self, key, now).await
            }

            async fn forget_expired_keys(
                &self,
                now: chrono::DateTime<chrono::Utc>,
                limit: u32,
            ) -> Result<u64, books_core::StoreError> {
                $crate::queries::forget_keys(self, now, limit).await
            }

            /// Looks up author 0 through the store's own table and index (on the
            /// primary): one round trip that fails when the database or the migrated
            /// schema is missing.
            async fn ready(&self) -> Result<(), books_core::StoreError> {
                $crate::queries::author_exists(self, 0).await.map(drop)
            }

            $($own)*
        }

        #[async_trait::async_trait]
        impl books_core::AuthorStore for $store {
            async fn add_author(&self, name: Option<&str>) -> Result<i64, books_core::StoreError> {
                $crate::queries::add_author(self, name).await
            }

            async fn remove_author(&self, id: i64) -> Result<bool, books_core::StoreError> {
                $crate::queries::remove_author(self, id).await
            }
        }
    };
}

pub(crate) use sql_store;
