//! The OpenAPI 3.1 document (`docs/openapi.json`), served with the embedding's own
//! server URL.

use bytes::Bytes;
use chrono::Datelike;
use serde_json::{Value, json};

use crate::config::Config;

/// The document as written, every path relative to the server URL.
pub(crate) const DOCUMENT: &str = include_str!("../docs/openapi.json");

/// The document with its server URL set to `config`'s base URL and prefix, and the
/// current year as the largest `year` a book may have.
pub(crate) fn served(config: &Config) -> Bytes {
    let mut document: Value = serde_json::from_str(DOCUMENT).expect("docs/openapi.json is JSON");
    document["servers"] = json!([{
        "url": format!("{}{}", config.base_url(), config.prefix()),
    }]);
    document["components"]["schemas"]["BookInput"]["properties"]["year"]["maximum"] =
        json!(config.now().year());
    Bytes::from(serde_json::to_vec(&document).expect("a JSON value serialises"))
}
