//! What it takes to add the versions tier (exact caching across processes) to the data
//! tier of [`crate::catalogue`]: a version the *database* keeps, moved by triggers on
//! every write whoever makes it, and reads that return it with their data.
//!
//! A version kept in this process's memory would not do: another process, or the host's
//! own SQL, writing the tables would leave it as it was, and the API would serve its
//! cached answers as if nothing had changed. The conformance suite's versions tier writes
//! the tables from outside the store between its reads, and catches exactly that.

use async_trait::async_trait;
use books_core::store::{BookPage, BookRecord, ListQuery, StoreError, Versions};
use sqlx::SqliteConnection;
use sqlx::sqlite::SqlitePool;

use crate::CatalogueStore;
use crate::catalogue::{book, failed, page};

/// The host runs this once beside its tables: the version and the triggers that move it
/// with every committed write to `catalogue` or `writers`.
pub const VERSION_TABLE: &str = "\
    CREATE TABLE catalogue_version (id INTEGER PRIMARY KEY CHECK (id = 1), \
        version INTEGER NOT NULL); \
    INSERT INTO catalogue_version VALUES (1, 0); \
    CREATE TRIGGER catalogue_inserted AFTER INSERT ON catalogue \
        BEGIN UPDATE catalogue_version SET version = version + 1; END; \
    CREATE TRIGGER catalogue_updated AFTER UPDATE ON catalogue \
        BEGIN UPDATE catalogue_version SET version = version + 1; END; \
    CREATE TRIGGER catalogue_deleted AFTER DELETE ON catalogue \
        BEGIN UPDATE catalogue_version SET version = version + 1; END; \
    CREATE TRIGGER writers_inserted AFTER INSERT ON writers \
        BEGIN UPDATE catalogue_version SET version = version + 1; END; \
    CREATE TRIGGER writers_updated AFTER UPDATE ON writers \
        BEGIN UPDATE catalogue_version SET version = version + 1; END; \
    CREATE TRIGGER writers_deleted AFTER DELETE ON writers \
        BEGIN UPDATE catalogue_version SET version = version + 1; END;";

impl CatalogueStore {
    /// A store over the host's pool with the versions tier: the host has run
    /// [`VERSION_TABLE`].
    pub fn with_versions(pool: SqlitePool) -> Self {
        Self { versioned: true, ..Self::new(pool) }
    }
}

/// The version on `conn`.
async fn version(conn: &mut SqliteConnection) -> Result<u64, sqlx::Error> {
    let version: i64 =
        sqlx::query_scalar("SELECT version FROM catalogue_version").fetch_one(conn).await?;
    Ok(version as u64)
}

/// Each read is one transaction, so the version and the data come from one snapshot
/// (rule 4: never a version newer than the data).
#[async_trait]
impl Versions for CatalogueStore {
    async fn version(&self) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(failed)?;
        version(&mut conn).await.map_err(failed)
    }

    async fn list_versioned(&self, query: &ListQuery) -> Result<(BookPage, u64), StoreError> {
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let at = version(&mut tx).await.map_err(failed)?;
        Ok((page(&mut tx, query).await.map_err(failed)?, at))
    }

    async fn get_versioned(&self, id: i64) -> Result<(Option<BookRecord>, u64), StoreError> {
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let at = version(&mut tx).await.map_err(failed)?;
        Ok((book(&mut tx, id).await.map_err(failed)?, at))
    }
}
