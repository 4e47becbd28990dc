//! Which tier traits a store's type implements, asked where the type is known
//! ([`implemented_tiers!`](crate::implemented_tiers)): each tier has two traits with one
//! method of the same name, one implemented for `&Probe<S>` only where `S` implements the
//! tier (it answers `true`), the other for every `Probe<S>` (`false`). Method lookup on
//! `&&Probe<S>` takes the first when it applies and falls back to the second: the
//! "autoref specialization" that works on stable Rust for a concrete type, not inside a
//! generic function (where `S` is not known to implement anything more than its bounds).

use std::marker::PhantomData;

use super::{ConditionalWrites, IdempotentCreates, ListQueries, Tiers, VersionTally, Versions};

/// A store's type, for the methods below.
#[doc(hidden)]
pub struct Probe<S: ?Sized>(PhantomData<fn(&S)>);

impl<S: ?Sized> Probe<S> {
    /// The probe of `store`'s type.
    #[doc(hidden)]
    pub fn of(_store: &S) -> Self {
        Self(PhantomData)
    }
}

macro_rules! probe {
    ($($tier:ident: $trait:ident as $yes:ident / $no:ident),+ $(,)?) => {
        $(
            #[doc(hidden)]
            pub trait $yes {
                fn $tier(&self) -> bool {
                    true
                }
            }
            impl<S: $trait + ?Sized> $yes for &Probe<S> {}

            #[doc(hidden)]
            pub trait $no {
                fn $tier(&self) -> bool {
                    false
                }
            }
            impl<S: ?Sized> $no for Probe<S> {}
        )+
    };
}

probe! {
    versions: Versions as HasVersions / NoVersions,
    version_tally: VersionTally as HasVersionTally / NoVersionTally,
    conditional_writes: ConditionalWrites as HasConditionalWrites / NoConditionalWrites,
    idempotent_creates: IdempotentCreates as HasIdempotentCreates / NoIdempotentCreates,
    list_queries: ListQueries as HasListQueries / NoListQueries,
}

impl Tiers {
    /// The tiers from their flags, in the order of [`Tiers`]' fields.
    #[doc(hidden)]
    pub fn from_flags(
        [
            versions,
            version_tally,
            conditional_writes,
            idempotent_creates,
            list_queries,
        ]: [bool; 5],
    ) -> Self {
        Self {
            versions,
            version_tally,
            conditional_writes,
            idempotent_creates,
            list_queries,
        }
    }

    /// The tiers here that `declared` lacks, by name (`"conditional writes"`).
    pub fn missing_from(&self, declared: &Tiers) -> Vec<&'static str> {
        [
            (self.versions, declared.versions, "versions"),
            (self.version_tally, declared.version_tally, "version tally"),
            (
                self.conditional_writes,
                declared.conditional_writes,
                "conditional writes",
            ),
            (
                self.idempotent_creates,
                declared.idempotent_creates,
                "idempotent creates",
            ),
            (self.list_queries, declared.list_queries, "list queries"),
        ]
        .into_iter()
        .filter(|&(here, there, _)| here && !there)
        .map(|(_, _, name)| name)
        .collect()
    }
}

/// The tier traits a store's type implements, as [`Tiers`]: `implemented_tiers!(&store)`.
///
/// Asked of the type where it is written out, so call it where the store's type is
/// concrete (`PostgresStore`, `Timed<PostgresStore>`), not inside a function generic over
/// the store, where it sees only the function's bounds. [`checked_api!`](crate::checked_api)
/// compares it with what the store's [`capabilities`](super::BookStore::capabilities)
/// name.
#[macro_export]
macro_rules! implemented_tiers {
    ($store:expr) => {{
        #[allow(unused_imports)]
        use $crate::store::probe::*;
        let probe = $crate::store::probe::Probe::of($store);
        $crate::store::Tiers::from_flags([
            (&&probe).versions(),
            (&&probe).version_tally(),
            (&&probe).conditional_writes(),
            (&&probe).idempotent_creates(),
            (&&probe).list_queries(),
        ])
    }};
}

/// A [`BooksApi`](crate::BooksApi) over `store`, as [`BooksApi::new`](crate::BooksApi::new)
/// makes it, or [`UndeclaredTiers`](crate::store::UndeclaredTiers) if the store's type implements a tier trait that its
/// [`capabilities`](super::BookStore::capabilities) do not name (a wrapper that forwards
/// `ConditionalWrites` but forgot `.conditional_writes()` would answer `If-Match` with
/// 501): `checked_api!(store, config)?`.
///
/// What is checked where: a store naming a tier it lacks does not compile
/// ([`Capabilities`](super::Capabilities)); one implementing a tier it does not name is
/// refused here, at start, where the store's type is written out; a wrapper that
/// implements fewer tiers than the store inside it is neither (nothing asks the
/// wrapper what it wraps): [`Hooked`](super::Hooked) keeps every tier.
///
/// ```text
/// let api = books_core::checked_api!(PostgresStore::connect_lazy(url)?, config)?;
/// ```
#[macro_export]
macro_rules! checked_api {
    ($store:expr, $config:expr $(,)?) => {{
        let store = $store;
        let implemented = $crate::implemented_tiers!(&store);
        $crate::BooksApi::try_new(store, $config, implemented)
    }};
}

#[cfg(test)]
mod tests {
    use crate::store::Tiers;

    #[test]
    fn missing_tiers_are_named() {
        let mut declared = Tiers::ALL;
        declared.conditional_writes = false;
        declared.list_queries = false;
        assert_eq!(
            Tiers::ALL.missing_from(&declared),
            ["conditional writes", "list queries"]
        );
        assert!(declared.missing_from(&Tiers::ALL).is_empty());
    }
}
