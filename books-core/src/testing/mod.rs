//! Reusable suites (feature `testing`): every store and every binding runs the same cases.
//!
//! - [`store_conformance_suite!`](crate::store_conformance_suite) checks a
//!   [`BookStore`] + [`AuthorStore`] against the storage contract.
//! - [`http_contract_suite!`](crate::http_contract_suite) checks the whole HTTP contract
//!   through any [`Harness`]: `handle()` in process, a framework binding, or real sockets.
//!
//! Each macro expands to one `#[tokio::test]` per case, so the caller needs `tokio`
//! (features `macros`, `rt-multi-thread`) among its dev-dependencies.

use std::future::Future;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;

use crate::{AuthorStore, BookStore, BooksApi, Config};

pub mod http_cases;
pub mod store_cases;
mod xml_tree;

pub use xml_tree::XmlNode;

/// `body` as it was before `coding` (`gzip`, `br` or `zstd`, as the API compresses);
/// panics on any other coding or on bytes that do not decode.
pub fn decoded(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        "gzip" => flate2::read::GzDecoder::new(body)
            .read_to_end(&mut out)
            .map(drop),
        "br" => brotli::BrotliDecompress(&mut &body[..], &mut out),
        "zstd" => ruzstd::decoding::StreamingDecoder::new(&mut &body[..])
            .map_err(std::io::Error::other)
            .and_then(|mut decoder| decoder.read_to_end(&mut out))
            .map(drop),
        other => panic!("unexpected coding {other}"),
    }
    .expect("decodes");
    out
}

/// A way to reach one API instance, built by the suite from a [`Config`].
#[async_trait]
pub trait Harness: Send + Sync {
    /// Sends a request whose URI is a path and query (`/api/books?page=2`) and returns the
    /// response with its whole body.
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes>;

    /// Adds an author to the API's store and returns its id.
    async fn add_author(&self, name: Option<&str>) -> i64;

    /// Removes an author from the API's store (its books keep no author).
    async fn remove_author(&self, id: i64);
}

/// The in-process harness: requests go straight to [`BooksApi::handle`].
#[derive(Debug, Clone)]
pub struct InProcess<S> {
    api: BooksApi,
    store: S,
}

impl<S: BookStore + AuthorStore + Clone> InProcess<S> {
    /// An API over `store` configured by `config`.
    pub fn new(store: S, config: Config) -> Self {
        Self {
            api: BooksApi::new(store.clone(), config),
            store,
        }
    }

    /// The API under test.
    pub fn api(&self) -> &BooksApi {
        &self.api
    }
}

#[async_trait]
impl<S: BookStore + AuthorStore + Clone> Harness for InProcess<S> {
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.api.handle(request.map(Full::new)).await
    }

    async fn add_author(&self, name: Option<&str>) -> i64 {
        self.store.add_author(name).await.expect("add author")
    }

    async fn remove_author(&self, id: i64) {
        self.store.remove_author(id).await.expect("remove author");
    }
}

/// Builds a harness for a configuration; implemented by every `Fn(Config) -> impl Future`.
pub trait MakeHarness: Send + Sync {
    /// The harness type.
    type Harness: Harness;
    /// Starts one API instance with `config`.
    fn make(&self, config: Config) -> impl Future<Output = Self::Harness> + Send;
}

impl<F, Fut, H> MakeHarness for F
where
    F: Fn(Config) -> Fut + Send + Sync,
    Fut: Future<Output = H> + Send,
    H: Harness,
{
    type Harness = H;
    fn make(&self, config: Config) -> impl Future<Output = H> + Send {
        self(config)
    }
}

/// Runs the storage contract against a store: `store_conformance_suite!(setup)` where
/// `setup` is an `async fn() -> S` returning a fresh, empty store with
/// `S: BookStore + AuthorStore + Clone`.
///
/// `store_conformance_suite!(setup, skip_unless = available)` runs a case only when the
/// `async fn() -> bool` `available` says so: for a database a developer may not have
/// running. `available` must print why it skips, and should refuse to skip in CI.
#[macro_export]
macro_rules! store_conformance_suite {
    ($setup:expr) => {
        $crate::store_conformance_suite!($setup, skip_unless = || async { true });
    };
    ($setup:expr, skip_unless = $available:expr) => {
        $crate::__cases!(store_cases, $setup, $available;
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
            author_vanishing_before_the_write_is_422,
            demo_data_loads_once_into_an_empty_store,
            reachable_store_is_ready,
            version_changes_with_every_write,
            reads_carry_their_version,
            version_tally_tells_creates_from_other_writes,
            known_version_catches_up,
            deep_pages_stay_exact_across_ranges,
            conditional_writes_check_the_book_as_it_is,
            concurrent_conditional_updates_let_one_through,
            keyed_creates_keep_their_record_with_the_book,
            keyed_creates_sent_together_each_keep_their_key,
        );
    };
}

/// Runs the HTTP contract through a harness: `http_contract_suite!(make)` where `make`
/// is a `Fn(Config) -> impl Future<Output = impl Harness>` building one API instance
/// over a fresh, empty store. It takes `skip_unless = available` like
/// [`store_conformance_suite!`](crate::store_conformance_suite).
#[macro_export]
macro_rules! http_contract_suite {
    ($make:expr) => {
        $crate::http_contract_suite!($make, skip_unless = || async { true });
    };
    ($make:expr, skip_unless = $available:expr) => {
        $crate::__cases!(http_cases, $make, $available;
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
macro_rules! __cases {
    (store_cases, $setup:expr, $available:expr; $($case:ident),+ $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if !($available)().await {
                    return;
                }
                let store = ($setup)().await;
                $crate::testing::store_cases::$case(store).await;
            }
        )+
    };
    (http_cases, $make:expr, $available:expr; $($case:ident),+ $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if !($available)().await {
                    return;
                }
                $crate::testing::http_cases::$case(&$make).await;
            }
        )+
    };
}
