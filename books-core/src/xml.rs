//! XML output that mirrors the JSON structure, written with quick-xml.

use std::borrow::Cow;
use std::io;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use serde_json::Value;

/// Renders `value` under a `<root>` element: one child element per object member,
/// one element per array item (`<book>` in `data`, `<message>` elsewhere), an empty
/// element for `null`, escaped text for everything else.
pub(crate) fn to_xml(root: &str, value: &Value) -> Vec<u8> {
    let mut writer = Writer::new(Vec::with_capacity(512));
    write_document(&mut writer, root, value).expect("writing to a Vec cannot fail");
    writer.into_inner()
}

fn write_document(writer: &mut Writer<Vec<u8>>, root: &str, value: &Value) -> io::Result<()> {
    writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    write_element(writer, root, value)
}

fn write_element(writer: &mut Writer<Vec<u8>>, name: &str, value: &Value) -> io::Result<()> {
    let text: Cow<'_, str> = match value {
        Value::Null => return writer.write_event(Event::Empty(BytesStart::new(name))),
        Value::Object(members) => {
            writer.write_event(Event::Start(BytesStart::new(name)))?;
            for (key, member) in members {
                if is_xml_name(key) {
                    write_element(writer, key, member)?;
                } else {
                    write_member(writer, key, member)?;
                }
            }
            return writer.write_event(Event::End(BytesEnd::new(name)));
        }
        Value::Array(items) => {
            writer.write_event(Event::Start(BytesStart::new(name)))?;
            let item = if name == "data" { "book" } else { "message" };
            for value in items {
                write_element(writer, item, value)?;
            }
            return writer.write_event(Event::End(BytesEnd::new(name)));
        }
        Value::String(text) => Cow::Borrowed(text),
        Value::Number(number) => Cow::Owned(number.to_string()),
        Value::Bool(flag) => Cow::Borrowed(if *flag { "true" } else { "false" }),
    };
    writer.write_event(Event::Start(BytesStart::new(name)))?;
    writer.write_event(Event::Text(text_event(&text)))?;
    writer.write_event(Event::End(BytesEnd::new(name)))
}

/// A member whose name is no XML name (a query parameter such as `filter[year]`, named in
/// a problem's `errors`): `<member name="filter[year]">`, its value inside as usual.
fn write_member(writer: &mut Writer<Vec<u8>>, key: &str, value: &Value) -> io::Result<()> {
    let mut start = BytesStart::new("member");
    start.push_attribute(("name", &*xml_safe(key)));
    match value {
        Value::Array(items) => {
            writer.write_event(Event::Start(start))?;
            for value in items {
                write_element(writer, "message", value)?;
            }
            writer.write_event(Event::End(BytesEnd::new("member")))
        }
        Value::Null => writer.write_event(Event::Empty(start)),
        other => {
            writer.write_event(Event::Start(start))?;
            let text = match other {
                Value::String(text) => Cow::Borrowed(text.as_str()),
                other => Cow::Owned(other.to_string()),
            };
            writer.write_event(Event::Text(text_event(&text)))?;
            writer.write_event(Event::End(BytesEnd::new("member")))
        }
    }
}

/// Whether `name` may name an element as it is: a letter or `_`, then letters, digits,
/// `-`, `_` and `.` (ASCII; every name the API writes of its own is one).
fn is_xml_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("xml"))
}

/// Escaped element text that parses back to exactly `text` (less what XML cannot carry):
/// quick-xml escapes the markup characters; a carriage return becomes `&#13;`, since a
/// parser would turn a raw one into a line feed.
fn text_event(text: &str) -> BytesText<'static> {
    let escaped = quick_xml::escape::escape(xml_safe(text));
    let escaped = if escaped.contains('\r') {
        escaped.replace('\r', "&#13;")
    } else {
        escaped.into_owned()
    };
    BytesText::from_escaped(escaped)
}

/// Whether XML 1.0 can carry `c` (its `Char` production; Rust strings hold no surrogates).
pub(crate) fn is_xml_char(c: char) -> bool {
    !matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// `text` with every character XML 1.0 cannot carry replaced by U+FFFD; borrowed (no
/// copy) when there is none. Applied to everything echoed from a request or read from
/// storage, in both formats, so JSON and XML say the same.
pub(crate) fn xml_safe(text: &str) -> Cow<'_, str> {
    if text.chars().all(is_xml_char) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(
            text.chars()
                .map(|c| {
                    if is_xml_char(c) {
                        c
                    } else {
                        char::REPLACEMENT_CHARACTER
                    }
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_json() {
        let value =
            serde_json::json!({"data": [{"id": 1, "t": "a<&>\"'"}], "n": null, "e": {"f": ["m"]}});
        let xml = String::from_utf8(to_xml("books", &value)).unwrap();
        assert_eq!(
            xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><books><data><book><id>1</id>\
             <t>a&lt;&amp;&gt;&quot;&apos;</t></book></data><n/><e><f><message>m</message></f></e></books>"
        );
    }

    #[test]
    fn text_xml_cannot_carry_becomes_replacement() {
        let value =
            serde_json::json!({"t": "a\u{0}b\u{1b}c\u{fffe}d\u{ffff}e\tf\ng\rh\u{85}\u{10ffff}"});
        let xml = String::from_utf8(to_xml("r", &value)).unwrap();
        assert_eq!(
            xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><r><t>a\u{fffd}b\u{fffd}c\u{fffd}d\u{fffd}e\tf\ng&#13;h\u{85}\u{10ffff}</t></r>"
        );
        assert!(matches!(xml_safe("plain é"), Cow::Borrowed("plain é")));
    }
}
