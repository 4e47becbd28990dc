//! What it takes to add the versions tier (exact caching across processes) to the data
//! tier of [`crate::catalogue`]: a version the *database* keeps, moved by triggers on
//! every write whoever makes it (books-sqlx's [`VersionTriggers`] installs them), and
//! reads that return it with their data.
//!
//! A version kept in this process's memory would not do: another process, or the host's
//! own SQL, writing the tables would leave it as it was, and the API would serve its
//! cached answers as if nothing had changed. The conformance suite's versions tier writes
//! the tables from outside the store between its reads, and catches exactly that.

use std::sync::LazyLock;

use async_trait::async_trait;
use books_core::store::{
    BookPage, BookRecord, BooksTally, ListQuery, StoreError, Version, VersionTally, Versions,
};
use books_sqlx::VersionTriggers;
use sqlx::Sqlite;

use crate::CatalogueStore;
use crate::catalogue::{TABLES, failed};

/// The version: counters in `catalogue_version`, moved by every write to `catalogue` or
/// `writers`, with the books' tally (`item_no` their id). The host installs it once beside its tables
/// (`VERSION.install(&pool).await?`; safe to repeat).
pub static VERSION: LazyLock<VersionTriggers<Sqlite>> = LazyLock::new(|| {
    VersionTriggers::new("catalogue_version", "catalogue")
        .and_then(|version| version.also("writers"))
        .and_then(|version| version.with_tally("item_no"))
        .expect("names of the host's tables")
});

/// Each read is one transaction, so the version and the data come from one snapshot
/// (rule 4: never a version newer than the data).
#[async_trait]
impl Versions for CatalogueStore {
    async fn version(&self) -> Result<Version, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(VERSION.version(&mut conn).await?)
    }

    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        let mut tx = books_sqlx::snapshot(&self.pool).await?;
        let at = VERSION.version(&mut tx).await?;
        Ok((TABLES.page(&mut tx, query).await?, at.count))
    }

    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        let mut tx = books_sqlx::snapshot(&self.pool).await?;
        let at = VERSION.version(&mut tx).await?;
        Ok((TABLES.book(&mut tx, id).await?, at.count))
    }
}

/// The tally from the counters the triggers keep, in one statement.
#[async_trait]
impl VersionTally for CatalogueStore {
    async fn tallied_version(&self, above: i64) -> Result<(Version, BooksTally), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        Ok(VERSION.tallied_version(&mut conn, above).await?)
    }
}
