//! What [`SqlStore`] does over any [`Backend`], the database's parts put together: what
//! every database shares is here and in [`tiers`](crate::tiers); what one does
//! differently is its [`Engine`](crate::backend::Engine)'s.

use std::sync::Arc;

use books_core::store::StoreError;

use crate::Error;
use crate::backend::{Backend, PoolState, Read, ServerSet, SqlStore};
use crate::check::Checked;
use crate::error::OrStoreError;
use crate::statement::{Arg, Statement};
use crate::store_sql::Statements;

impl<DB: Backend> SqlStore<DB> {
    /// A store over `servers`, its tables behind `schema`.
    pub(crate) fn assemble(
        servers: DB::Servers,
        extra: DB::Extra,
        schema: Option<Arc<str>>,
    ) -> Self {
        let prefix = prefix(schema.as_deref());
        Self {
            sql: Arc::new(Statements::new(DB::DIALECT, &prefix)),
            check: Arc::new(DB::version_check(
                &servers,
                &extra,
                &prefix,
                schema.as_deref(),
            )),
            creates: Arc::default(),
            totals: Arc::default(),
            servers,
            extra,
            schema,
        }
    }

    #[cfg(any(feature = "postgres", feature = "mysql"))]
    /// This store built again from its parts (its statements and check for them, its
    /// queues new): after one of them changed.
    pub(crate) fn rebuilt(self) -> Self {
        let most = self.totals.most_listed();
        Self::assemble(self.servers, self.extra, self.schema).with_kept_ids(most)
    }

    /// This store keeping the ids of a filtered list that keeps at most `most` books
    /// (4,096 by default, and at most; 0: never), read once per version instead of its
    /// count, so that its pages in id order are read by id: a title's 1,000 matches at
    /// 1M books, say, which a page of 20 would otherwise search for. Each id costs 8
    /// bytes, and a store keeps at most 262,144.
    pub fn with_kept_ids(self, most: usize) -> Self {
        Self {
            totals: Arc::new(crate::totals::Totals::listing(most)),
            ..self
        }
    }

    /// The store's statements.
    pub(crate) fn sql(&self) -> &Statements {
        &self.sql
    }

    #[cfg(any(feature = "postgres", feature = "mysql"))]
    /// What goes before a table's name: the schema and a dot, or nothing.
    pub(crate) fn prefix(&self) -> String {
        prefix(self.schema.as_deref())
    }

    /// Whether statements may be kept prepared.
    pub(crate) fn persistent(&self) -> bool {
        DB::persistent(&self.extra)
    }

    /// Runs a read ([`Engine::read`](crate::backend::Engine::read)).
    pub(crate) async fn read(
        &self,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
    ) -> Result<Vec<DB::Row>, StoreError> {
        DB::read(self, to, statement, args).await
    }

    /// Runs a write ([`Engine::write`](crate::backend::Engine::write)).
    pub(crate) async fn write(
        &self,
        statement: &Statement,
        then: Option<&Statement>,
        args: &[Arg<'_>],
    ) -> Result<Vec<DB::Row>, sqlx::Error> {
        DB::write(self, statement, then, args).await
    }

    /// The version check's reading (see [`VersionCheck::tallied`]), its count told to the
    /// filtered totals (a count that went backwards forgets them).
    pub(crate) async fn tallied(&self, above: Option<i64>) -> Result<Checked, StoreError> {
        let check = self.check.tallied(self.servers.check_pool(), above);
        let checked = self.servers.on_primary(check).await?;
        self.totals.seen(checked.version.count as i64);
        Ok(checked)
    }

    /// The embedded migrations, recording into [`MIGRATIONS_TABLE`](crate::MIGRATIONS_TABLE):
    /// run them with your own tooling, or read each one's SQL (also in this crate's
    /// `migrations/` folder).
    pub fn migrator() -> sqlx::migrate::Migrator {
        crate::migrate::migrator_of(DB::MIGRATIONS)
    }

    /// Applies the embedded migrations: call once at start; safe to repeat, to run from
    /// several processes at once, and beside a host's own sqlx migrations (they record
    /// into a table of their own).
    pub async fn migrate(&self) -> Result<(), Error> {
        DB::migrate(self).await
    }

    /// Inserts an author with this id, or renames it if it exists; later
    /// [`add_author`](books_core::store::AuthorStore::add_author) ids continue after the
    /// largest id.
    pub async fn upsert_author(&self, id: i64, name: Option<&str>) -> Result<(), StoreError> {
        let (sql, persistent) = (self.sql(), self.persistent());
        DB::retried(self, || async {
            let mut tx = DB::begin(self).await?;
            let args = [Arg::Int(id), Arg::Name(name)];
            DB::rows(&mut tx, &sql.authors.upsert, &args, persistent).await?;
            if let Some(follow) = &sql.authors.ids_follow {
                DB::text_rows(&mut tx, follow.clone()).await?;
            }
            tx.commit().await
        })
        .await
        .or_store_error()
    }

    /// Closes every pool the store reads and writes through.
    pub async fn close(&self) {
        self.servers.close().await;
    }

    /// The store's pools, for metrics: each one's connections open, idle and at most.
    pub fn pools(&self) -> Vec<PoolState> {
        self.servers.pools()
    }
}

/// What goes before a table's name in `schema`: the schema and a dot, or nothing.
fn prefix(schema: Option<&str>) -> String {
    schema
        .map(|schema| format!("{schema}."))
        .unwrap_or_default()
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
/// `name` if the store takes it for a schema (PostgreSQL) or database (MariaDB): 1 to 63
/// of `a-z`, `0-9` and `_`, not starting with a digit (so it is written into SQL as is).
pub(crate) fn checked_name(name: &str) -> Result<Arc<str>, Error> {
    let valid = (1..=63).contains(&name.len())
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(name.into())
    } else {
        Err(Error::InvalidSchema(name.to_owned()))
    }
}
