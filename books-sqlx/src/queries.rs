//! The book store's operations, written once over a store's way of running a statement
//! ([`Engine::read`](crate::backend::Engine::read) and `write`): which pool, which
//! protocol, whether a read may go to a replica. A database's own module holds only what
//! differs between the databases.

use std::borrow::Cow;

use books_core::store::{
    BookInput, BookPage, BookRecord, IdempotencyRecord, KeyedCreate, ListQuery, StoreError,
};
use chrono::{DateTime, Utc};

use crate::backend::Backend;
use crate::backend::{Read, SqlStore};
use crate::batch::{Created, NewBook};
use crate::error::OrStoreError;
use crate::list_sql::{Filter, ListSql, ids_of};
use crate::rows::{self, StoreRow};
use crate::statement::{Arg, Statement};
use crate::store_sql::RANGE;
use crate::totals::{Counted, Known, Mark, UNCHANGED};

fn decoded<T>(result: Result<T, sqlx::Error>) -> Result<T, StoreError> {
    result.or_store_error()
}

/// [`Versions::list_versioned`](books_core::store::Versions::list_versioned): a page
/// and, for an empty one, the total and version by themselves.
pub(crate) async fn list(
    store: &SqlStore<impl Backend>,
    query: &ListQuery,
) -> Result<(BookPage, u64), StoreError> {
    let sql = store.sql();
    if !query.is_plain() {
        let list = ListSql::new(sql.dialect, &sql.schema, query);
        let Some(filter) = &list.filter else {
            let page = list.page.paged(query.limit, query.offset);
            let args = list.args(None, None);
            let read = page_and_tally(store, (&page, &args), &list.tally, &args, false).await;
            return reported(store, read.map(Tallied::page));
        };
        // The total last counted for the filter, taken if it still holds; else counted.
        // In id order, the page is of the filter's ids if kept (read instead of a count,
        // once a request, if few enough), else starts from the nearest mark at that
        // version.
        let at = list.by_id().then_some((query.offset, query.limit));
        let mut known = store.totals.known(filter, at);
        let mut ids_read = false;
        loop {
            if known.listable && !ids_read {
                ids_read = true;
                if let Some(_claim) = store.totals.claim(filter) {
                    every_id(store, &list, filter, &known).await?;
                    known = store.totals.known(filter, at);
                }
            }
            // The page narrowed to the kept ids (its one argument their list), or from a
            // mark; else whole.
            let listed = known.listed.as_deref().zip(list.listed());
            let ids = listed.as_ref().map(|(ids, _)| list.ids_arg(ids));
            let seeking = known.seek.zip(list.seeking()).filter(|_| listed.is_none());
            let narrowed = listed.is_some() || seeking.is_some();
            let page = match (listed, &seeking) {
                (Some((_, page)), _) => Cow::Owned(page),
                (None, Some((mark, page))) => Cow::Owned(
                    page.paged(query.limit, query.offset - mark.before)
                        .into_owned(),
                ),
                (None, None) => list.page.paged(query.limit, query.offset),
            };
            let args = list.args(known.counted, seeking.map(|(mark, _)| mark));
            let ids = ids.as_deref().map(|ids| [Arg::Text(ids)]);
            let page_args = ids.as_ref().map_or(&args[..], |ids| &ids[..]);
            let read = page_and_tally(store, (&page, page_args), &list.tally, &args, true);
            let read = read.await?;
            let counted = Counted {
                version: read.version,
                origin: read.origin,
                total: read.total,
            };
            match store.totals.settle(filter, &known, counted) {
                // The version moved under a narrowed page, and its statement (from a
                // mark) or its tally (of kept ids, none found) counted: the mark or ids
                // may not stand, the page is asked again. (Kept ids' books at another
                // version answer no total: below.)
                Some(_) if narrowed && read.total != UNCHANGED => {
                    known = store.totals.known(filter, None);
                }
                Some(total) => {
                    // Seen by the totals as it settled; reported to the history alone.
                    store.check.lineage().read_at(read.version as u64);
                    if at.is_some() && known.listed.is_none() {
                        let ids: Vec<i64> = read.books.iter().map(|book| book.id).collect();
                        let marks = Mark::of_page(query.offset, &ids);
                        store.totals.mark(filter, &known, counted, marks);
                    }
                    return Ok(Tallied { total, ..read }.page());
                }
                // Kept ids of another version: read again, once, unless another request
                // is reading them (then counted).
                None if known.listed.is_some() && !ids_read => {
                    known = store.totals.known(filter, None);
                    known.listable = true;
                }
                None if known.counted.is_some() => {
                    known = store.totals.known(filter, None).counting();
                }
                None => return Err(StoreError::other("a filtered page came without its count")),
            }
        }
    }
    // Past the first range, start from the page's range (`book_ranges`).
    let statement = if query.offset < RANGE {
        sql.list.paged(query.limit, query.offset)
    } else {
        Cow::Borrowed(&sql.deep)
    };
    let args = [
        Arg::Int(i64::from(query.limit)),
        Arg::Int(i64::try_from(query.offset).unwrap_or(i64::MAX)),
    ];
    let read = page_and_tally(store, (&statement, &args), &sql.tally, &args, false).await;
    reported(store, read.map(Tallied::page))
}

/// Reads every id `list`'s filter keeps, in order, and keeps them with their count if
/// they are few enough ([`LISTED`]).
async fn every_id(
    store: &SqlStore<impl Backend>,
    list: &ListSql,
    filter: &Filter,
    known: &Known,
) -> Result<(), StoreError> {
    let Some(every) = list.every_id() else {
        return Ok(());
    };
    let rows = store
        .read(Read::Data, &every, &list.args(None, None))
        .await?;
    let row = first(&rows)?;
    let at = (
        decoded(row.int_named("version"))?,
        decoded(row.int_named("origin"))?,
    );
    if let Some(ids) = decoded(row.name(0))?.as_deref().and_then(ids_of) {
        store.totals.list(filter, known, at, ids);
    }
    Ok(())
}

/// `read`, its count reported to the store's history ([`Lineage::read_at`]): a state the
/// API may keep answers of.
///
/// [`Lineage::read_at`]: crate::lineage::Lineage::read_at
fn reported<T>(
    store: &SqlStore<impl Backend>,
    read: Result<(T, u64), StoreError>,
) -> Result<(T, u64), StoreError> {
    if let Ok((_, count)) = &read {
        store.check.lineage().read_at(*count);
        store.totals.seen(*count as i64);
    }
    read
}

/// A page's books, with the total, version and origin its statement answered.
struct Tallied {
    books: Vec<BookRecord>,
    total: i64,
    version: i64,
    origin: i64,
}

impl Tallied {
    /// The page and the version.
    fn page(self) -> (BookPage, u64) {
        let page = BookPage {
            books: self.books,
            total: self.total as u64,
        };
        (page, self.version as u64)
    }
}

/// The rows of `page` (with its arguments) with the total and version (and, if
/// `counted`, the origin) they carry, or for an empty page those of `tally` (which binds
/// the arguments it names of `args`).
async fn page_and_tally(
    store: &SqlStore<impl Backend>,
    (page, page_args): (&Statement, &[Arg<'_>]),
    tally: &Statement,
    args: &[Arg<'_>],
    counted: bool,
) -> Result<Tallied, StoreError> {
    let rows = store.read(Read::Data, page, page_args).await?;
    let origin = match rows.first() {
        Some(row) if counted => decoded(row.int_named("origin"))?,
        _ => 0,
    };
    let rows = decoded(rows.iter().map(StoreRow::page).collect())?;
    let (books, tallied) = rows::page(rows);
    let (total, version, origin) = match tallied {
        Some((total, version)) => (total, version, origin),
        None => {
            let rows = store.read(Read::Primary, tally, args).await?;
            let row = first(&rows)?;
            let origin = if counted { decoded(row.int(2))? } else { 0 };
            (decoded(row.int(0))?, decoded(row.int(1))?, origin)
        }
    };
    Ok(Tallied {
        books,
        total,
        version,
        origin,
    })
}

/// [`Versions::get_versioned`](books_core::store::Versions::get_versioned): the book,
/// or its absence, with the version.
pub(crate) async fn get(
    store: &SqlStore<impl Backend>,
    id: i64,
) -> Result<(Option<BookRecord>, u64), StoreError> {
    let rows = store
        .read(Read::Data, &store.sql().books.get, &[Arg::Int(id)])
        .await?;
    let row = decoded(first(&rows)?.versioned())?;
    reported(store, Ok((row.book.map(Into::into), row.version as u64)))
}

/// One create without a key, in one statement.
pub(crate) async fn create(store: &SqlStore<impl Backend>, new: &NewBook) -> Created {
    let book = &new.book;
    let rows = store
        .write(&store.sql().books.create, None, &book_args(book, new.now))
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

/// [`IdempotentCreates::idempotency_record`](books_core::store::IdempotentCreates::idempotency_record), on the
/// primary.
pub(crate) async fn key_record(
    store: &SqlStore<impl Backend>,
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<IdempotencyRecord>, StoreError> {
    let args = [Arg::Text(key), Arg::Time(now)];
    let rows = store
        .read(Read::Primary, &store.sql().keys.record, &args)
        .await?;
    rows.first()
        .map(|row| decoded(row.key_record()))
        .transpose()
}

/// [`IdempotentCreates::forget_expired_keys`](books_core::store::IdempotentCreates::forget_expired_keys).
pub(crate) async fn forget_keys(
    store: &SqlStore<impl Backend>,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<u64, StoreError> {
    let args = [Arg::Time(now), Arg::Int(i64::from(limit))];
    let rows = store
        .write(&store.sql().keys.forget_expired, None, &args)
        .await;
    Ok(rows.or_store_error()?.len() as u64)
}

/// [`BookStore::update`](books_core::store::BookStore::update).
pub(crate) async fn update(
    store: &SqlStore<impl Backend>,
    id: i64,
    book: &BookInput,
    now: DateTime<Utc>,
) -> Result<Option<BookRecord>, StoreError> {
    let sql = store.sql();
    let [title, author, year, now] = book_args(book, now);
    let rows = store
        .write(
            &sql.books.update,
            sql.books.updated.as_ref(),
            &[title, author, year, now, Arg::Int(id)],
        )
        .await
        .or_write_error(book.author_id)?;
    rows.first()
        .map(|row| decoded(row.book()).map(Into::into))
        .transpose()
}

/// [`BookStore::delete`](books_core::store::BookStore::delete).
pub(crate) async fn delete(store: &SqlStore<impl Backend>, id: i64) -> Result<bool, StoreError> {
    let rows = store
        .write(&store.sql().books.delete, None, &[Arg::Int(id)])
        .await;
    Ok(!rows.or_store_error()?.is_empty())
}

/// [`BookStore::author_exists`](books_core::store::BookStore::author_exists), on the primary: a
/// write's validation must see the author a moment-old write added.
pub(crate) async fn author_exists(
    store: &SqlStore<impl Backend>,
    id: i64,
) -> Result<bool, StoreError> {
    let rows = store
        .read(Read::Primary, &store.sql().authors.exists, &[Arg::Int(id)])
        .await?;
    decoded(first(&rows)?.flag(0))
}

/// [`AuthorStore::add_author`](books_core::store::AuthorStore::add_author).
pub(crate) async fn add_author(
    store: &SqlStore<impl Backend>,
    name: Option<&str>,
) -> Result<i64, StoreError> {
    let rows = store
        .write(&store.sql().authors.add, None, &[Arg::Name(name)])
        .await;
    decoded(first(&rows.or_store_error()?)?.int(0))
}

/// [`AuthorStore::remove_author`](books_core::store::AuthorStore::remove_author).
pub(crate) async fn remove_author(
    store: &SqlStore<impl Backend>,
    id: i64,
) -> Result<bool, StoreError> {
    let rows = store
        .write(&store.sql().authors.remove, None, &[Arg::Int(id)])
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
