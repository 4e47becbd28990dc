//! `BooksApi::handle` on any method, path, query, headers and body, every answer checked.
#![no_main]

use std::sync::OnceLock;

use books_core::{BooksApi, Config};
use books_fuzz::{check, demo_api, request, runtime};
use http_body_util::Full;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static API: OnceLock<BooksApi> = OnceLock::new();
    let api = API.get_or_init(|| demo_api(Config::default().with_extended_ping(true)));
    let Some(request) = request(data) else {
        return;
    };
    let method = request.method().clone();
    let response = runtime().block_on(api.handle(request.map(Full::new)));
    check(&method, &response);
});
