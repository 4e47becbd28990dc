//! The HTTP contract, case by case (run through [`http_contract_suite!`](crate::http_contract_suite)),
//! one file per topic; this module holds the harness the cases share.

#![allow(missing_docs)]

use std::num::NonZeroU32;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use http::{HeaderMap, Request};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::{Harness, MakeHarness, XmlNode};
use crate::clock::ManualClock;
use crate::config::Config;
use crate::config::RouteScheme;

mod books;
mod conditional;
mod docs_page;
mod errors;
mod idempotency;
mod if_match;
mod input;
mod list_queries;
mod negotiation;
mod outside;
mod pagination;
mod routing;
mod validation;

pub use books::*;
pub use conditional::*;
pub use docs_page::*;
pub use errors::*;
pub use idempotency::*;
pub use if_match::*;
pub use input::*;
pub use list_queries::*;
pub use negotiation::*;
pub use outside::*;
pub use pagination::*;
pub use routing::*;
pub use validation::*;

/// The base URL every suite instance is configured with.
pub const BASE: &str = "http://books.test";
const FORM: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";
const XML: &str = "application/xml; charset=utf-8";
const PROBLEM_JSON: &str = "application/problem+json";
const PROBLEM_XML: &str = "application/problem+xml; charset=utf-8";
const INVALID: &str = "The given data was invalid.";

fn june() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 15, 12, 0, 0).unwrap()
}

/// One API instance under test and the clock it reads.
struct App<H> {
    harness: H,
    clock: ManualClock,
}

/// A response with its body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ASCII header"))
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    fn xml(&self) -> XmlNode {
        XmlNode::parse(&self.body)
    }

    fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self
    }

    /// Asserts a problem-details JSON body and returns it without its `instance`, which
    /// must name the answer's `X-Request-Id`.
    fn problem(self, status: u16, detail: &str) -> Value {
        let reply = self.expect(status);
        assert_eq!(reply.header("content-type"), Some(PROBLEM_JSON));
        assert_eq!(reply.header("vary"), Some("Accept"));
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        let mut body = reply.json();
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["status"], status);
        assert_eq!(body["detail"], detail, "{body}");
        assert!(body["title"].is_string());
        let instance = body.as_object_mut().and_then(|b| b.remove("instance"));
        assert_eq!(instance, Some(json!(reply.instance())), "instance");
        body
    }

    /// `urn:request:` and the answer's `X-Request-Id`, which every answer carries.
    fn instance(&self) -> String {
        let id = self.header("x-request-id").expect("X-Request-Id");
        format!("urn:request:{id}")
    }

    /// An XML problem body without its `<instance>`, which must name the answer's
    /// `X-Request-Id` (for comparing with the same problem in JSON).
    fn xml_problem(&self) -> XmlNode {
        assert_eq!(self.header("content-type"), Some(PROBLEM_XML));
        let mut xml = self.xml();
        assert_eq!(xml.name, "problem");
        let at = xml.children.iter().position(|c| c.name == "instance");
        let instance = xml.children.remove(at.expect("<instance>"));
        assert_eq!(instance.text, self.instance());
        xml
    }

    /// Asserts a 422 and returns its `errors` object.
    fn invalid(self) -> Value {
        let body = self.problem(422, INVALID);
        assert_eq!(body["title"], "Unprocessable Content");
        body["errors"].clone()
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

async fn start<M: MakeHarness>(make: &M, tweak: impl FnOnce(Config) -> Config) -> App<M::Harness> {
    let clock = ManualClock::new(june());
    let config = tweak(
        Config::default()
            .with_base_url(BASE)
            .with_clock(clock.clone()),
    );
    App {
        harness: make.make(config).await,
        clock,
    }
}

impl<H: Harness> App<H> {
    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .harness
            .send(request.body(body.into()).expect("valid request"))
            .await;
        let (parts, body) = response.into_parts();
        Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }

    async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, &[], Bytes::new()).await
    }

    async fn accept(&self, path: &str, accept: &str) -> Reply {
        self.send("GET", path, &[("accept", accept)], Bytes::new())
            .await
    }

    async fn form(&self, method: &str, path: &str, pairs: &[(&str, &str)]) -> Reply {
        self.send(method, path, &[("content-type", FORM)], form(pairs))
            .await
    }

    async fn json_body(&self, method: &str, path: &str, body: Value) -> Reply {
        self.send(method, path, &[("content-type", JSON)], body.to_string())
            .await
    }

    async fn author(&self, name: &str) -> i64 {
        self.harness.add_author(Some(name)).await
    }

    /// Creates a valid book and returns its id.
    async fn book(&self, author: i64, title: &str) -> i64 {
        let reply = self
            .valid_write("POST", "/api/books", author, title)
            .await
            .expect(201);
        reply.json()["id"].as_i64().expect("id")
    }

    async fn total(&self) -> i64 {
        self.get("/api/books").await.expect(200).json()["meta"]["total"]
            .as_i64()
            .expect("total")
    }

    /// POSTs a form that is valid except for `field = value` (or without `field` for `None`)
    /// and returns the 422's `errors`.
    async fn errors_for(&self, field: &str, value: Option<&str>) -> Value {
        let author = self.author("Someone").await.to_string();
        let mut pairs = vec![
            ("title", "Valid"),
            ("author_id", author.as_str()),
            ("year", "2020"),
        ];
        pairs.retain(|(name, _)| *name != field);
        if let Some(value) = value {
            pairs.push((field, value));
        }
        self.form("POST", "/api/books", &pairs).await.invalid()
    }
}

/// A valid form body for a book by `author`.
fn valid(author: i64, title: &str) -> String {
    form(&[
        ("title", title),
        ("author_id", &author.to_string()),
        ("year", "2021"),
    ])
}

impl<H: Harness> App<H> {
    async fn seed(&self, count: usize) -> Vec<i64> {
        let author = self.author("Seed Author").await;
        let mut ids = Vec::new();
        for n in 0..count {
            ids.push(self.book(author, &format!("Book {n}")).await);
        }
        ids
    }

    /// Sends a valid book form with `method` to `path`.
    async fn valid_write(&self, method: &str, path: &str, author: i64, title: &str) -> Reply {
        self.send(
            method,
            path,
            &[("content-type", FORM)],
            valid(author, title),
        )
        .await
    }
}

fn book_json(id: i64, title: &str, year: i64, created: &str, updated: &str) -> Value {
    json!({"id": id, "title": title, "year": year, "created_at": created, "updated_at": updated})
}

const JUNE: &str = "2026-06-15 12:00:00";
