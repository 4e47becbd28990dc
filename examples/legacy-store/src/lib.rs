//! A books store over a host's *existing* SQLite tables, which have other names than the
//! API's:
//!
//! ```sql
//! catalogue(item_no, label, writer_no, pub_year, added, changed)
//! writers(writer_no, full_name)
//! ```
//!
//! [`CatalogueStore`] implements every tier on books-sqlx's parts: the data tier
//! ([`catalogue`]), the versions tier and its tally ([`versions`]), conditional writes
//! ([`conditional`]), idempotent creates ([`keys`]) and list queries: what
//! `docs/stores.md` ("Writing a store") walks through. Its tests run every tier of the
//! conformance suite and the whole HTTP contract suite through it.

pub mod catalogue;
pub mod conditional;
pub mod keys;
pub mod versions;
pub mod writers;

pub use catalogue::CatalogueStore;

/// The host's tables as they stood before the API came (for the tests and the docs: a
/// real host has them already).
pub const LEGACY_TABLES: &str = "\
    CREATE TABLE writers (writer_no INTEGER PRIMARY KEY AUTOINCREMENT, full_name TEXT); \
    CREATE TABLE catalogue (item_no INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT NOT NULL, \
        writer_no INTEGER, pub_year INTEGER NOT NULL, added TEXT NOT NULL, \
        changed TEXT NOT NULL);";
