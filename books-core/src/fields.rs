//! Looking for a request field by walking the fields rather than hashing its name.

use http::HeaderMap;
use http::header::HeaderName;

/// Whether `headers` has a `name` field. A lookup hashes the name (about a hundred
/// instructions); a request's few fields are compared sooner, and most API clients send
/// no `Accept-Encoding`, `If-None-Match` … at all, which the hash would cost in full.
pub(crate) fn has(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers.keys().any(|field| field == name)
}
