//! The storage seam: what a store implements, in tiers.
//!
//! # Tiers
//!
//! Every store implements the **data tier**, [`BookStore`]: the seed's operations (a page
//! of books with its total, one book, create, update, delete), whether an author exists,
//! and readiness. With it alone the API serves the whole contract. Each capability
//! beyond it is a trait of its own, which a store implements if it can and names in
//! [`BookStore::capabilities`]:
//!
//! | tier | trait | what the API does with it | without it |
//! |---|---|---|---|
//! | versions | [`Versions`] | keeps rendered answers, exact across processes | reads every answer from the store |
//! | version tally | [`VersionTally`] (beside `Versions`) | keeps cached pages across creates | a create empties the cache |
//! | conditional writes | [`ConditionalWrites`] | `If-Match` on `PUT` and `DELETE` | 501 for a write with `If-Match` |
//! | idempotent creates | [`IdempotentCreates`] | `Idempotency-Key` on creates | 501 for a create with a key |
//! | list queries | [`ListQueries`] (the data tier's `list` filters and sorts) | `filter[…]` and `sort` on the list | 501 for a list with either |
//!
//! Nothing is ever stale or lost without a tier: the API asks for what it needs and
//! answers plainly when a store lacks it. Each trait's documentation states every rule a
//! store keeps; each tier has a tier of the conformance suite (`books_core::testing`,
//! feature `testing`). `docs/stores.md` in the repository walks through a store over a
//! host's existing tables, and through adding the versions tier to it.
//!
//! [`Hooked`] wraps any store generically (timing, logging, counting its calls) and keeps
//! every tier it has; see [`Capabilities`] for what is checked at compile time.
//!
//! [`SharedCheck`] is the one way the API shares a version check between the requests
//! that arrive together; a store may use it for reads of its own that are shared the same
//! way (the PostgreSQL store does, for its primary's WAL position).

mod capabilities;
mod conditional_writes;
mod data;
mod hooked;
mod idempotent_creates;
mod list_query;
#[doc(hidden)]
pub mod probe;
mod shared_check;
mod versions;

pub(crate) use capabilities::StoreTiers;
pub use capabilities::{Capabilities, Tiers, UndeclaredTiers};
pub use conditional_writes::{Conditional, ConditionalWrites, Precondition};
pub use data::{AuthorStore, BookInput, BookPage, BookRecord, BookStore, StoreError, Unready};
pub use hooked::{Hooked, StoreCall, StoreFuture, StoreHook};
pub use idempotent_creates::{
    IdempotencyKey, IdempotencyRecord, IdempotentCreates, KeyedCreate, RenderAnswer, StoredAnswer,
};
pub use list_query::{
    ListFilter, ListQueries, ListQuery, SortField, SortKey, YearRange, fold_title,
};
pub use shared_check::SharedCheck;
pub use versions::{BooksTally, Version, VersionTally, Versions};
