//! The storage tiers of a SQL store, written once: `sql_store!(Store)` implements every
//! tier of [`books_core::store`] but the conditional writes (each database locks
//! differently, so each store's own file has them) over the store's [`StatementRunner`]
//! and the operations in [`queries`](crate::queries).
//!
//! [`StatementRunner`]: crate::queries::StatementRunner

/// The storage tiers for a SQL store (a [`StatementRunner`] with a `creates` queue and
/// the inherent methods `tallied` (its version check) and `pushed_version`): every tier
/// but the conditional writes, which each store's own file implements (each database
/// locks differently).
///
/// [`StatementRunner`]: crate::queries::StatementRunner
macro_rules! sql_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl books_core::store::BookStore for $store {
            async fn list(
                &self,
                query: &books_core::store::ListQuery,
            ) -> Result<books_core::store::BookPage, books_core::store::StoreError> {
                Ok($crate::queries::list(self, query).await?.0)
            }

            async fn get(
                &self,
                id: i64,
            ) -> Result<Option<books_core::store::BookRecord>, books_core::store::StoreError> {
                Ok($crate::queries::get(self, id).await?.0)
            }

            /// Creates that arrive while another is written go together (group commit:
            /// docs/decisions.md, "Creates commit together").
            async fn create(
                &self,
                book: &books_core::store::BookInput,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<books_core::store::BookRecord, books_core::store::StoreError> {
                let book = $crate::batch::NewBook {
                    book: book.clone(),
                    now,
                    key: None,
                };
                $crate::queries::book_of(self.creates.create(self, book).await)
            }

            async fn update(
                &self,
                id: i64,
                book: &books_core::store::BookInput,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<books_core::store::BookRecord>, books_core::store::StoreError> {
                $crate::queries::update(self, id, book, now).await
            }

            async fn delete(&self, id: i64) -> Result<bool, books_core::store::StoreError> {
                $crate::queries::delete(self, id).await
            }

            async fn author_exists(&self, id: i64) -> Result<bool, books_core::store::StoreError> {
                $crate::queries::author_exists(self, id).await
            }

            /// Looks up author 0 through the store's own table and index (on the
            /// primary): one round trip that fails when the database or the migrated
            /// schema is missing.
            async fn ready(&self) -> Result<(), books_core::store::StoreError> {
                $crate::queries::author_exists(self, 0).await.map(drop)
            }

            fn capabilities(&self) -> books_core::store::Capabilities<'_> {
                books_core::store::Capabilities::none()
                    .with_versions(self)
                    .with_version_tally(self)
                    .with_conditional_writes(self)
                    .with_idempotent_creates(self)
                    .with_list_queries()
            }
        }

        /// The version is kept by triggers in the writing transaction, whoever writes,
        /// and read in the same statement as the data.
        #[async_trait::async_trait]
        impl books_core::store::Versions for $store {
            async fn version(&self) -> Result<u64, books_core::store::StoreError> {
                Ok(self.tallied(None).await?.version as u64)
            }

            async fn list_versioned(
                &self,
                query: &books_core::store::ListQuery,
            ) -> Result<(books_core::store::BookPage, u64), books_core::store::StoreError> {
                $crate::queries::list(self, query).await
            }

            async fn get_versioned(
                &self,
                id: i64,
            ) -> Result<(Option<books_core::store::BookRecord>, u64), books_core::store::StoreError>
            {
                $crate::queries::get(self, id).await
            }

            fn known_version(&self) -> Option<u64> {
                self.pushed_version()
            }
        }

        #[async_trait::async_trait]
        impl books_core::store::VersionTally for $store {
            async fn tallied_version(
                &self,
                above: i64,
            ) -> Result<(u64, books_core::store::BooksTally), books_core::store::StoreError> {
                let checked = self.tallied(Some(above)).await?;
                Ok((checked.version as u64, checked.books))
            }
        }

        /// A key's record is written in the book's own transaction.
        #[async_trait::async_trait]
        impl books_core::store::IdempotentCreates for $store {
            /// Written together with other creates, each with its key's record.
            async fn create_keyed(
                &self,
                book: &books_core::store::BookInput,
                now: chrono::DateTime<chrono::Utc>,
                key: &books_core::store::IdempotencyKey,
            ) -> Result<books_core::store::KeyedCreate, books_core::store::StoreError> {
                let book = $crate::batch::NewBook {
                    book: book.clone(),
                    now,
                    key: Some(key.clone()),
                };
                self.creates.create(self, book).await
            }

            async fn idempotency_record(
                &self,
                key: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<books_core::store::IdempotencyRecord>, books_core::store::StoreError>
            {
                $crate::queries::key_record(self, key, now).await
            }

            async fn forget_expired_keys(
                &self,
                now: chrono::DateTime<chrono::Utc>,
                limit: u32,
            ) -> Result<u64, books_core::store::StoreError> {
                $crate::queries::forget_keys(self, now, limit).await
            }
        }

        #[async_trait::async_trait]
        impl books_core::store::AuthorStore for $store {
            async fn add_author(
                &self,
                name: Option<&str>,
            ) -> Result<i64, books_core::store::StoreError> {
                $crate::queries::add_author(self, name).await
            }

            async fn remove_author(&self, id: i64) -> Result<bool, books_core::store::StoreError> {
                $crate::queries::remove_author(self, id).await
            }
        }
    };
}

pub(crate) use sql_store;
