//! XML output that mirrors the JSON structure, written with quick-xml.

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
    let text = match value {
        Value::Null => return writer.write_event(Event::Empty(BytesStart::new(name))),
        Value::Object(members) => {
            writer.write_event(Event::Start(BytesStart::new(name)))?;
            for (key, member) in members {
                write_element(writer, key, member)?;
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
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
    };
    writer.write_event(Event::Start(BytesStart::new(name)))?;
    writer.write_event(Event::Text(BytesText::new(&text)))?;
    writer.write_event(Event::End(BytesEnd::new(name)))
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
}
