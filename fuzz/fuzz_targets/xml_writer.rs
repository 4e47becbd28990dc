//! The XML writer on any JSON value (keys renamed to element names, as the API's own are):
//! the document parses with a strict XML check and mirrors the value, text shown as
//! the API shows stored text.
#![no_main]

use books_core::testing::XmlNode;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let value = named(value);
    let xml = books_core::fuzzing::to_xml("root", &value);
    XmlNode::parse(&xml).assert_mirrors(&shown(value), "message");
});

/// Object keys become element names `k0`, `k1`, … (the API's keys are fixed names).
fn named(value: Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .enumerate()
                .map(|(i, (_, v))| (format!("k{i}"), named(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(named).collect()),
        other => other,
    }
}

/// The value as the XML should carry it.
fn shown(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(books_core::fuzzing::shown(&text)),
        Value::Object(members) => {
            Value::Object(members.into_iter().map(|(k, v)| (k, shown(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(shown).collect()),
        other => other,
    }
}
