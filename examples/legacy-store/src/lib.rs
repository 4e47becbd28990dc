//! A books store over a host's *existing* tables, which have other names than the API's,
//! with every tier: on SQLite ([`sqlite`]) and on MariaDB ([`mariadb`]).
//!
//! ```sql
//! catalogue(item_no, label, writer_no, pub_year, added, changed)  -- SQLite
//! writers(writer_no, full_name)
//! items(item_no, label, creator_no, pub_year, ins_ts, upd_ts)     -- MariaDB
//! creators(creator_no, display_name)
//! ```
//!
//! Each is books-sqlx's [`HostStore`](books_sqlx::HostStore) over the host's column
//! names, with the host's own insert, update and delete: what `docs/stores.md` ("Writing
//! a store") walks through. The reads, the version triggers, the idempotency keys, the
//! list's filter and sort, conditional writes and conflict retries are books-sqlx's
//! parts. Their tests run every tier of the conformance suite and the whole HTTP contract
//! suite through each, with the host's own SQL writing beside them.

pub mod mariadb;
pub mod sqlite;

pub use mariadb::ItemsStore;
pub use sqlite::CatalogueStore;
