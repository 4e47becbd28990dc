//! What a store names beyond the data tier: its capability tiers.

use std::fmt::Debug;

use super::{ConditionalWrites, IdempotentCreates, VersionTally, Versions};

/// The capability tiers a store implements beyond the data tier, as
/// [`BookStore::capabilities`](super::BookStore::capabilities) returns them. Each is a trait of its own with its own
/// rules and its own tier of the conformance suite.
///
/// ```
/// # use books_core::store::Capabilities;
/// # fn f<S: books_core::store::Versions + books_core::store::ConditionalWrites>(store: &S) -> Capabilities<'_> {
/// Capabilities::none().with_versions(store).with_conditional_writes(store)
/// # }
/// ```
#[derive(Clone, Copy, Default)]
pub struct Capabilities<'a> {
    versions: Option<&'a dyn Versions>,
    tally: Option<&'a dyn VersionTally>,
    conditional_writes: Option<&'a dyn ConditionalWrites>,
    idempotent_creates: Option<&'a dyn IdempotentCreates>,
    list_queries: bool,
}

impl<'a> Capabilities<'a> {
    /// The data tier alone.
    pub fn none() -> Self {
        Self::default()
    }

    /// With [`Versions`]: the API caches rendered answers, exactly.
    pub fn with_versions(self, versions: &'a dyn Versions) -> Self {
        Self {
            versions: Some(versions),
            ..self
        }
    }

    /// With [`VersionTally`]: cached pages survive creates. Taken only with
    /// [`with_versions`](Self::with_versions).
    pub fn with_version_tally(self, tally: &'a dyn VersionTally) -> Self {
        Self {
            tally: Some(tally),
            ..self
        }
    }

    /// With [`ConditionalWrites`]: `If-Match` on `PUT` and `DELETE`.
    pub fn with_conditional_writes(self, writes: &'a dyn ConditionalWrites) -> Self {
        Self {
            conditional_writes: Some(writes),
            ..self
        }
    }

    /// With [`IdempotentCreates`]: `Idempotency-Key` on creates.
    pub fn with_idempotent_creates(self, creates: &'a dyn IdempotentCreates) -> Self {
        Self {
            idempotent_creates: Some(creates),
            ..self
        }
    }

    /// With the list queries tier: [`list`](super::BookStore::list) (and
    /// [`list_versioned`](Versions::list_versioned)) honour a
    /// [`ListQuery`](super::ListQuery)'s filter and sort, so the API serves `filter[…]`
    /// and `sort` (without it, 501 for a list that asks for either).
    pub fn with_list_queries(self) -> Self {
        Self {
            list_queries: true,
            ..self
        }
    }

    /// Whether the store filters and sorts lists.
    pub fn list_queries(&self) -> bool {
        self.list_queries
    }

    /// The versions tier, if the store has it.
    pub fn versions(&self) -> Option<&'a dyn Versions> {
        self.versions
    }

    /// The version tally, if the store has it and the versions tier.
    pub fn version_tally(&self) -> Option<&'a dyn VersionTally> {
        self.tally.filter(|_| self.versions.is_some())
    }

    /// The conditional writes tier, if the store has it.
    pub fn conditional_writes(&self) -> Option<&'a dyn ConditionalWrites> {
        self.conditional_writes
    }

    /// The idempotent creates tier, if the store has it.
    pub fn idempotent_creates(&self) -> Option<&'a dyn IdempotentCreates> {
        self.idempotent_creates
    }

    /// Which tiers these are, by name.
    pub fn tiers(&self) -> Tiers {
        Tiers {
            versions: self.versions.is_some(),
            version_tally: self.version_tally().is_some(),
            conditional_writes: self.conditional_writes.is_some(),
            idempotent_creates: self.idempotent_creates.is_some(),
            list_queries: self.list_queries,
        }
    }
}

impl Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.tiers().fmt(f)
    }
}

/// Which capability tiers a store has ([`Capabilities::tiers`]), or which an API serves
/// ([`BooksApi::tiers`](crate::BooksApi::tiers)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tiers {
    /// [`Versions`]: exact caching across processes.
    pub versions: bool,
    /// [`VersionTally`]: cached pages survive creates.
    pub version_tally: bool,
    /// [`ConditionalWrites`]: `If-Match`.
    pub conditional_writes: bool,
    /// [`IdempotentCreates`]: `Idempotency-Key`.
    pub idempotent_creates: bool,
    /// [List queries](Capabilities::with_list_queries): `filter[…]` and `sort`.
    pub list_queries: bool,
}

impl Tiers {
    /// Every tier.
    pub const ALL: Tiers = Tiers {
        versions: true,
        version_tally: true,
        conditional_writes: true,
        idempotent_creates: true,
        list_queries: true,
    };
}
