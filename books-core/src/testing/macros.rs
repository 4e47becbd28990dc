//! The suites' macros: one `#[tokio::test]` per case, for every store and binding.

/// Runs the storage contract against a store, tier by tier: one `#[tokio::test]` per
/// case, in a module per tier (`data`, `versions`, `version_tally`, `conditional_writes`,
/// `idempotent_creates`, `list_queries`).
///
/// ```text
/// books_core::store_conformance_suite! {
///     #[cfg_attr(not(my_database), ignore = "set MY_DATABASE_URL")] // any attributes, on every case
///     setup: fresh,                 // async fn() -> S: a fresh, empty store
///     tiers: [versions, conditional_writes],
///     outside_writes: host_sql,     // optional: async fn(S, OutsideWrite)
///     authors: seed,                // optional: a SeedAuthors<S> (default: the store's AuthorStore)
///     guard: cleanup,               // optional: fn() -> G, held for the whole case
/// }
/// ```
///
/// `S: BookStore + Clone`. The data tier always runs, with a case that the store's
/// [`capabilities`](crate::store::BookStore::capabilities) name exactly the listed tiers
/// and every tier trait the store's type implements;
/// each listed tier's cases need `S` to implement its trait (a tier listed that the
/// store lacks does not compile). `known_version` beside `versions` adds the case for a
/// store that knows its version without asking (pushed by the database).
///
/// `outside_writes` is how the suite writes the store's data from outside it (an
/// [`OutsideWrite`](crate::testing::store_cases::OutsideWrite) through the store's own
/// backend, as a host's SQL would): the cases that need it — writes between and beside
/// the suite's reads, a backup restored under the store — are generated only with it,
/// so a store nothing else can write (an in-memory one) leaves it out. A version kept in
/// memory, or a page read across two snapshots, fails them.
///
/// `authors` seeds the authors the cases need ([`SeedAuthors`](crate::testing::store_cases::SeedAuthors)):
/// without it the store's own [`AuthorStore`](crate::store::AuthorStore); a store whose
/// authors are read-only gives the host's seeding instead.
///
/// `guard` is for clean-up: its value is made before the case, handed to `setup` by
/// reference (`setup` is then an `async fn(&G) -> S`), and dropped after the case,
/// passed or failed. So a setup that makes databases or schemas can ask for the guard
/// that drops them, and cannot run without one.
#[macro_export]
macro_rules! store_conformance_suite {
    (
        $(#[$attr:meta])*
        setup: $setup:expr,
        tiers: [$($tier:ident),* $(,)?]
        $(, outside_writes: $hook:expr)?
        $(, authors: $authors:expr)?
        $(, guard: $guard:expr)? $(,)?
    ) => {
        $crate::__store_tiers!(
            [$(#[$attr])*] ($setup, [$($hook)?], [$($authors)?], [$($tier),*], [$(($guard)())?]),
            [$($tier),*], [$($hook)?]
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_tiers {
    ($attrs:tt $fixture:tt, [$($tier:ident),*], $hook:tt) => {
        mod data {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                empty_store_lists_nothing,
                create_then_get_round_trips,
                get_missing_is_none,
                list_orders_by_id_with_page_boundaries,
                list_offset_past_the_end_keeps_total,
                list_and_get_join_authors,
                removed_author_leaves_book_without_author,
                create_with_missing_author_is_author_not_found,
                update_replaces_fields_and_keeps_created_at,
                update_of_missing_id_is_none,
                update_with_missing_author_is_author_not_found,
                delete_removes_only_that_book,
                ids_are_never_reused_after_delete,
                author_exists_matches_authors,
                concurrent_creates_get_distinct_ids,
                creates_sent_together_each_get_their_own_book,
                author_vanishing_before_a_write_is_422,
                demo_data_loads_once_into_an_empty_store,
                reachable_store_is_ready,
                deep_pages_stay_exact_across_ranges,
                capabilities_are_the_tiers_tested(
                    $crate::testing::store_cases::tiers_named(&[$(stringify!($tier)),*]),
                    // Asked here, where the store's type is known.
                    |store| $crate::implemented_tiers!(store)
                ),
            );
            $crate::__with_hook!($hook $crate::__store_cases!($attrs $fixture;
                pages_and_totals_come_from_one_snapshot,
            ););
        }
        $($crate::__store_tier!($tier, $attrs $fixture, $hook);)*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_tier {
    (versions, $attrs:tt $fixture:tt, $hook:tt) => {
        mod versions {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                version_moves_with_every_write,
                reads_carry_their_version,
                cached_reads_see_writes_behind_the_api,
            );
            $crate::__with_hook!($hook $crate::__store_cases!($attrs $fixture;
                version_moves_with_writes_from_outside,
                reads_carry_writes_from_outside,
                cached_reads_see_writes_from_outside,
                a_restored_backup_is_never_served_from_the_cache,
            ););
        }
    };
    (known_version, $attrs:tt $fixture:tt, $hook:tt) => {
        mod known_version {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                known_version_catches_up,
            );
            $crate::__with_hook!($hook $crate::__store_cases!($attrs $fixture;
                known_version_catches_up_with_writes_from_outside,
            ););
        }
    };
    (version_tally, $attrs:tt $fixture:tt, $hook:tt) => {
        mod version_tally {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                version_tally_tells_creates_from_other_writes,
            );
            $crate::__with_hook!($hook $crate::__store_cases!($attrs $fixture;
                version_tally_tells_creates_from_writes_from_outside,
            ););
        }
    };
    (conditional_writes, $attrs:tt $fixture:tt, $hook:tt) => {
        mod conditional_writes {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                conditional_writes_check_the_book_as_it_is,
                concurrent_conditional_updates_let_one_through,
                author_vanishing_before_a_conditional_write_is_422,
            );
            $crate::__with_hook!($hook $crate::__store_cases!($attrs $fixture;
                conditional_writes_see_writes_from_outside,
            ););
        }
    };
    (list_queries, $attrs:tt $fixture:tt, $hook:tt) => {
        mod list_queries {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                list_queries_filter_by_author_year_and_title,
                list_queries_sort_by_every_field_with_ties_by_id,
                list_queries_stay_exact_across_writes,
            );
            $crate::__with_hook!($hook $crate::__store_cases!($attrs $fixture;
                list_queries_stay_exact_across_writes_from_outside,
                filtered_pages_and_totals_come_from_one_snapshot,
                filtered_totals_follow_every_write,
                filtered_pages_follow_every_write,
            ););
        }
    };
    (idempotent_creates, $attrs:tt $fixture:tt, $hook:tt) => {
        mod idempotent_creates {
            #[allow(unused_imports)]
            use super::*;
            $crate::__store_cases!($attrs $fixture;
                keyed_creates_keep_their_record_with_the_book,
                keyed_creates_sent_together_each_keep_their_key,
                author_vanishing_before_a_keyed_create_is_422,
            );
        }
    };
    ($other:ident, $attrs:tt $fixture:tt, $hook:tt) => {
        ::core::compile_error!(concat!(
            "no tier is named `", stringify!($other), "` (versions, known_version, ",
            "version_tally, conditional_writes, idempotent_creates, list_queries)"
        ));
    };
}

/// The cases given, if the suite has an outside-writes hook; none without.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_hook {
    ([] $($cases:tt)*) => {};
    ([$hook:expr] $($cases:tt)*) => { $($cases)* };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_cases {
    ($attrs:tt $fixture:tt; $($case:ident $(($($arg:expr),*))?),+ $(,)?) => {
        $($crate::__store_case!($attrs $fixture; $case $(($($arg),*))?);)+
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_case {
    (
        [$(#[$attr:meta])*]
        ($setup:expr, [$($hook:expr)?], [$($authors:expr)?], [$($tier:ident),*], [$($guard:expr)?]);
        $case:ident $(($($arg:expr),*))?
    ) => {
        $(#[$attr])*
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            $(let guard = $guard;)?
            let fixture = $crate::testing::store_cases::Fixture::new(
                $crate::__with_guard!(($setup) [$($guard, guard)?]).await,
                $crate::__either!([$($authors)?] $crate::testing::store_cases::ThroughStore),
                $crate::__either!(
                    [$(Some($crate::testing::store_cases::Outside::through($hook)))?]
                    None
                ),
            );
            $(let fixture = $crate::__settling!($tier, fixture);)*
            $crate::testing::store_cases::$case(fixture $($(, $arg)*)?).await;
        }
    };
}

/// `setup()`, or `setup(&guard)` when the suite has a guard.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_guard {
    (($setup:expr) []) => {
        ($setup)()
    };
    (($setup:expr) [$made:expr, $guard:ident]) => {
        ($setup)(&$guard)
    };
}

/// `make`, or `make` with the suite's guard handed to it.
#[doc(hidden)]
#[macro_export]
macro_rules! __make_with_guard {
    (($make:expr) []) => {
        $make
    };
    (($make:expr) [$made:expr, $guard:ident]) => {
        |config| ($make)(&$guard, config)
    };
}

/// The first expression if there is one, else the second.
#[doc(hidden)]
#[macro_export]
macro_rules! __either {
    ([$given:expr] $default:expr) => {
        $given
    };
    ([] $default:expr) => {
        $default
    };
}

/// A fixture that waits for a pushed version to catch up, for a store with versions.
#[doc(hidden)]
#[macro_export]
macro_rules! __settling {
    (versions, $fixture:ident) => {
        $fixture.settling()
    };
    ($tier:ident, $fixture:ident) => {
        $fixture
    };
}

/// Runs the HTTP contract through a harness: `http_contract_suite!(make)` where `make`
/// is a `Fn(Config) -> impl Future<Output = impl Harness>` building one API instance
/// over a fresh, empty store. The long form takes attributes for every case and a guard
/// held for each and handed to `make` (as in
/// [`store_conformance_suite!`](crate::store_conformance_suite); `make` is then a
/// `Fn(&G, Config) -> impl Future<Output = impl Harness>`): `http_contract_suite! { #[…]
/// make: in_process, outside_writes: host_sql, guard: cleanup }`. Cases of `If-Match`,
/// `Idempotency-Key` and `filter[…]`/`sort` check the documented 501 instead when the
/// harness's [`tiers`](crate::testing::Harness::tiers) lack the store tier they need.
///
/// `outside_writes` (the store suite's hook, for a `make` that builds an
/// [`InProcess`](crate::testing::InProcess)) adds the case that reads through the API
/// after writes the API did not make: give it wherever anything but this process may
/// write the store, or a version kept in memory passes the HTTP suite and serves stale
/// answers.
#[macro_export]
macro_rules! http_contract_suite {
    ($make:expr $(,)?) => {
        $crate::http_contract_suite! { make: $make }
    };
    (
        $(#[$attr:meta])*
        make: $make:expr
        $(, outside_writes: $hook:expr)?
        $(, guard: $guard:expr)? $(,)?
    ) => {
        $crate::__with_hook!([$($hook)?]
            $(#[$attr])*
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reads_follow_writes_from_outside() {
                $(let guard = ($guard)();)?
                $(let outside = $crate::testing::store_cases::Outside::through($hook);)?
                let make = $crate::__make_with_guard!(($make) [$($guard, guard)?]);
                $crate::testing::http_cases::reads_follow_writes_from_outside(&make, &outside)
                    .await;
            }
        );
        $crate::__http_cases!([$(#[$attr])*] ($make, [$(($guard)())?]);
            ping_answers_ok,
            ping_extended_adds_time_and_version,
            unknown_paths_are_not_found,
            trailing_slash_is_tolerated_once,
            unserved_method_gets_405_with_allow,
            head_is_get_without_body,
            options_lists_allowed_methods,
            invalid_ids_name_no_book,
            index_scheme_only,
            action_scheme_only,
            both_schemes_by_default,
            custom_prefix_moves_every_route,
            docs_page_is_served_like_every_route,
            json_is_the_default_format,
            accept_selects_xml,
            accept_q_zero_and_specificity,
            errors_follow_the_negotiated_format,
            create_returns_201_with_location,
            create_accepts_json_numbers_and_strings,
            create_accepts_multipart,
            create_ignores_unknown_fields_and_takes_last_repeat,
            get_one_returns_the_book,
            include_author_on_every_route,
            include_author_is_null_without_name_or_author,
            include_rejects_unknown_names,
            include_tolerates_empty_whitespace_and_repeats,
            update_replaces_and_touches_updated_at,
            update_validates_before_existence,
            delete_returns_id_and_removes,
            validation_title_rules,
            validation_author_rules,
            validation_year_rules,
            validation_reports_every_field_at_once,
            validation_json_types,
            validation_stores_nothing,
            title_of_255_and_256_unicode_characters,
            year_bound_follows_the_clock,
            body_of_unsupported_type_is_415,
            undecodable_body_is_400,
            body_too_large_is_413,
            pagination_first_middle_last_beyond,
            pagination_invalid_page_is_400,
            pagination_of_empty_store,
            pagination_links_keep_include,
            pagination_links_ignore_host_headers,
            pagination_page_size_is_configurable,
            pages_stay_exact_across_creates,
            list_filters_and_sorts_select_and_order,
            list_filters_count_pages_and_links_carry_them,
            list_filter_and_sort_errors_are_400_by_parameter,
            action_list_links_use_action_path,
            xml_book_mirrors_json,
            xml_page_mirrors_json,
            xml_error_mirrors_json,
            write_token_guards_writes_only,
            targets_without_a_path_are_not_found,
            titles_xml_cannot_carry_are_refused,
            stored_text_xml_cannot_carry_is_replaced,
            echoed_include_xml_cannot_carry_is_replaced,
            json_integers_beyond_64_bits_fail_the_range_rule,
            request_ids_are_echoed_or_made,
            reads_carry_strong_etags,
            if_none_match_answers_304,
            compressed_answers_have_their_own_tags,
            cache_control_on_every_answer,
            date_on_every_answer,
            if_match_guards_updates_and_deletes,
            if_match_compares_the_representation_the_request_would_get,
            if_match_comes_after_the_usual_checks,
            if_match_lets_one_of_concurrent_writes_win,
            if_match_can_be_required,
            writes_ignore_if_none_match,
            idempotent_creates_replay_their_answer,
            idempotency_key_reused_with_another_request_is_422,
            malformed_idempotency_keys_are_400,
            failed_creates_leave_their_key_unused,
            concurrent_requests_with_one_key_create_one_book,
            idempotency_keys_expire,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __http_cases {
    ($attrs:tt $make:tt; $($case:ident),+ $(,)?) => {
        $($crate::__http_case!($attrs $make; $case);)+
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __http_case {
    ([$(#[$attr:meta])*] ($make:expr, [$($guard:expr)?]); $case:ident) => {
        $(#[$attr])*
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            $(let guard = $guard;)?
            let make = $crate::__make_with_guard!(($make) [$($guard, guard)?]);
            $crate::testing::http_cases::$case(&make).await;
        }
    };
}
