//! Parses XML bodies back with quick-xml's reader, to compare them with the JSON.

use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::Value;

/// An element of a parsed XML document: its name, child elements and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlNode {
    /// The element name.
    pub name: String,
    /// Child elements in document order.
    pub children: Vec<XmlNode>,
    /// The unescaped text directly inside the element.
    pub text: String,
    /// The element's attributes, unescaped, in document order.
    pub attributes: Vec<(String, String)>,
}

impl XmlNode {
    /// Parses a whole document; panics with the reason if it is not well-formed XML.
    pub fn parse(xml: &[u8]) -> XmlNode {
        let text = std::str::from_utf8(xml).expect("XML is UTF-8");
        assert!(
            text.starts_with(r#"<?xml version="1.0" encoding="UTF-8"?>"#),
            "XML declaration missing: {text}"
        );
        // quick-xml's reader does not check XML 1.0's `Char` production: a well-formed
        // document holds no character outside it, even escaped as text.
        if let Some(bad) = text.chars().find(|&c| !crate::xml::is_xml_char(c)) {
            panic!("not well-formed XML: holds {bad:?}: {text}");
        }
        let mut reader = Reader::from_str(text);
        reader.config_mut().check_end_names = true;
        let mut stack: Vec<XmlNode> = Vec::new();
        let mut root = None;
        loop {
            match reader.read_event().expect("well-formed XML") {
                Event::Start(start) => stack.push(Self::named(&start)),
                Event::Empty(empty) => {
                    let node = Self::named(&empty);
                    match stack.last_mut() {
                        Some(parent) => parent.children.push(node),
                        None => root = Some(node),
                    }
                }
                Event::Text(text) => {
                    let decoded = text.decode().expect("text decodes");
                    let unescaped = quick_xml::escape::unescape(&decoded).expect("text unescapes");
                    stack.last_mut().expect("text inside an element").text += &unescaped;
                }
                Event::GeneralRef(reference) => {
                    let name = reference.decode().expect("reference decodes");
                    let entity = format!("&{name};");
                    let unescaped = quick_xml::escape::unescape(&entity).expect("known entity");
                    stack.last_mut().expect("text inside an element").text += &unescaped;
                }
                Event::End(_) => {
                    let node = stack.pop().expect("balanced elements");
                    match stack.last_mut() {
                        Some(parent) => parent.children.push(node),
                        None => root = Some(node),
                    }
                }
                Event::Eof => break,
                _ => {}
            }
        }
        assert!(stack.is_empty(), "unclosed elements");
        root.expect("a root element")
    }

    fn named(start: &quick_xml::events::BytesStart<'_>) -> XmlNode {
        let attributes = start
            .attributes()
            .map(|attribute| {
                let attribute = attribute.expect("a well-formed attribute");
                let key = String::from_utf8(attribute.key.as_ref().to_vec()).expect("UTF-8");
                let value = attribute.unescape_value().expect("an attribute unescapes");
                (key, value.into_owned())
            })
            .collect();
        XmlNode {
            name: String::from_utf8(start.name().as_ref().to_vec()).expect("UTF-8 name"),
            children: Vec::new(),
            text: String::new(),
            attributes,
        }
    }

    /// The value of the attribute `name`, if the element has it.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The JSON member this element stands for: its name, or for a `<member name="…">`
    /// (a member whose name is no XML name), that name.
    pub fn member_name(&self) -> &str {
        match (self.name.as_str(), self.attribute("name")) {
            ("member", Some(name)) => name,
            _ => &self.name,
        }
    }

    /// The first child element with this name.
    pub fn child(&self, name: &str) -> Option<&XmlNode> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Asserts that this element carries the same values as `json`: one child per
    /// member in order, one `item` element per array entry, empty for `null`.
    pub fn assert_mirrors(&self, json: &Value, item: &str) {
        match json {
            Value::Object(members) => {
                let names: Vec<_> = self.children.iter().map(XmlNode::member_name).collect();
                let keys: Vec<_> = members.keys().map(String::as_str).collect();
                assert_eq!(names, keys, "children of <{}>", self.name);
                for (child, value) in self.children.iter().zip(members.values()) {
                    child.assert_mirrors(value, item);
                }
            }
            Value::Array(items) => {
                assert_eq!(self.children.len(), items.len(), "items of <{}>", self.name);
                for (child, value) in self.children.iter().zip(items) {
                    assert_eq!(child.name, item, "item of <{}>", self.name);
                    child.assert_mirrors(value, item);
                }
            }
            Value::Null => {
                assert!(
                    self.children.is_empty() && self.text.is_empty(),
                    "<{}> empty",
                    self.name
                )
            }
            Value::String(text) => assert_eq!(&self.text, text, "text of <{}>", self.name),
            other => assert_eq!(self.text, other.to_string(), "text of <{}>", self.name),
        }
    }
}
