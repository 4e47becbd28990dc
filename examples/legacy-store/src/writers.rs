//! The writers, which the host adds and removes (the API only reads them): for the demo
//! data and the tests. Removing one leaves its books without one.

use async_trait::async_trait;
use books_core::store::{AuthorStore, StoreError};

use crate::CatalogueStore;
use crate::catalogue::failed;

#[async_trait]
impl AuthorStore for CatalogueStore {
    async fn add_author(&self, name: Option<&str>) -> Result<i64, StoreError> {
        let added =
            sqlx::query_scalar("INSERT INTO writers (full_name) VALUES (?1) RETURNING writer_no");
        added.bind(name).fetch_one(&self.pool).await.map_err(failed)
    }

    async fn remove_author(&self, id: i64) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await.map_err(failed)?;
        let orphan = sqlx::query("UPDATE catalogue SET writer_no = NULL WHERE writer_no = ?1");
        orphan.bind(id).execute(&mut *tx).await.map_err(failed)?;
        let gone = sqlx::query("DELETE FROM writers WHERE writer_no = ?1").bind(id);
        let gone = gone.execute(&mut *tx).await.map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(gone.rows_affected() > 0)
    }
}
