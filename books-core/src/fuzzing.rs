//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): internals that the
//! public API reaches only through a whole request. Not a stable API.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;

/// Decodes a write's body by its `Content-Type`, as `POST /books` does; the error is the
/// status of the problem the client would get.
pub async fn decode_body(headers: &HeaderMap, body: Bytes) -> Result<(), u16> {
    crate::body::decode(headers, body)
        .await
        .map(drop)
        .map_err(|problem| problem.status.as_u16())
}

/// The XML the API writes for `value` under `root`.
pub fn to_xml(root: &str, value: &Value) -> Vec<u8> {
    crate::xml::to_xml(root, value)
}

/// `text` as both formats show text read from storage (characters XML cannot carry
/// replaced by U+FFFD).
pub fn shown(text: &str) -> String {
    crate::xml::xml_safe(text).into_owned()
}
