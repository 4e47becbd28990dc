//! The HTTP contract, case by case (run through [`http_contract_suite!`](crate::http_contract_suite)).

#![allow(missing_docs)]

use std::num::NonZeroU32;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use http::{HeaderMap, Request};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::{Harness, MakeHarness, XmlNode};
use crate::{Config, ManualClock, RouteScheme};

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

// ---------------------------------------------------------------- ping and routing

pub async fn ping_answers_ok(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let reply = app.get("/api/ping").await.expect(200);
    assert_eq!(reply.header("content-type"), Some(JSON));
    assert_eq!(reply.header("vary"), Some("Accept"));
    assert_eq!(reply.json(), json!({"status": "ok"}));
}

pub async fn ping_extended_adds_time_and_version(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_extended_ping(true)).await;
    let reply = app.get("/api/ping").await.expect(200);
    assert_eq!(
        reply.json(),
        json!({"status": "ok", "time": "2026-06-15T12:00:00Z", "version": crate::VERSION})
    );
}

pub async fn unknown_paths_are_not_found(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for path in [
        "/api",
        "/api/",
        "/api/nope",
        "/api/books/1/extra",
        "/api/pings",
        "/api/ping/x",
    ] {
        let body = app.get(path).await.problem(404, "Not found");
        assert_eq!(
            body,
            json!({"type": "about:blank", "title": "Not Found", "status": 404, "detail": "Not found"}),
            "{path}"
        );
    }
    app.send("POST", "/api/nope", &[], Bytes::new())
        .await
        .problem(404, "Not found");
}

pub async fn trailing_slash_is_tolerated_once(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let id = app.seed(1).await[0];
    app.get("/api/ping/").await.expect(200);
    assert_eq!(
        app.get("/api/books/").await.expect(200).json()["meta"]["total"],
        1
    );
    assert_eq!(
        app.get(&format!("/api/books/{id}/"))
            .await
            .expect(200)
            .json()["id"],
        id
    );
    app.get("/api/books//").await.problem(404, "Not found");
    app.get("/api/ping//").await.problem(404, "Not found");
}

pub async fn unserved_method_gets_405_with_allow(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let cases = [
        ("POST", "/api/ping", "GET, HEAD, OPTIONS"),
        ("DELETE", "/api/ping", "GET, HEAD, OPTIONS"),
        ("DELETE", "/api/books", "GET, HEAD, OPTIONS, POST"),
        ("PUT", "/api/books", "GET, HEAD, OPTIONS, POST"),
        ("POST", "/api/books/1", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("PATCH", "/api/books/1", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("GET", "/api/books/create", "OPTIONS, POST"),
        ("POST", "/api/books/list", "GET, HEAD, OPTIONS"),
        ("GET", "/api/books/update/1", "OPTIONS, PUT"),
        ("GET", "/api/books/delete/1", "DELETE, OPTIONS"),
    ];
    for (method, path, allow) in cases {
        let reply = app.send(method, path, &[], Bytes::new()).await;
        assert_eq!(reply.header("allow"), Some(allow), "{method} {path}");
        reply.problem(405, "Method not allowed");
    }
}

pub async fn head_is_get_without_body(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let id = app.seed(2).await[0];
    for path in [
        "/api/ping".to_owned(),
        "/api/books".to_owned(),
        format!("/api/books/{id}?include=author"),
        "/api/books/999".to_owned(),
        "/api/nope".to_owned(),
    ] {
        let get = app.get(&path).await;
        let head = app.send("HEAD", &path, &[], Bytes::new()).await;
        assert_eq!(head.status, get.status, "{path}");
        assert_eq!(
            head.header("content-type"),
            get.header("content-type"),
            "{path}"
        );
        assert_eq!(head.header("vary"), Some("Accept"));
        assert!(head.body.is_empty(), "HEAD {path} has a body");
        if let Some(length) = head.header("content-length") {
            assert_eq!(length, get.body.len().to_string(), "{path}");
        }
    }
}

pub async fn options_lists_allowed_methods(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for (path, allow) in [
        ("/api/ping", "GET, HEAD, OPTIONS"),
        ("/api/books", "GET, HEAD, OPTIONS, POST"),
        ("/api/books/5", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("/api/books/create", "OPTIONS, POST"),
    ] {
        let reply = app
            .send("OPTIONS", path, &[], Bytes::new())
            .await
            .expect(204);
        assert_eq!(reply.header("allow"), Some(allow), "{path}");
        assert!(reply.body.is_empty());
    }
    app.send("OPTIONS", "/api/nope", &[], Bytes::new())
        .await
        .problem(404, "Not found");
}

pub async fn invalid_ids_name_no_book(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    app.book(author, "Exists").await;
    for segment in [
        "abc",
        "-1",
        "0",
        "1.5",
        "99999999999999999999",
        "9223372036854775808",
        "999999",
    ] {
        let path = format!("/api/books/{segment}");
        app.get(&path).await.problem(404, "Book not found");
        app.send("DELETE", &path, &[], Bytes::new())
            .await
            .problem(404, "Book not found");
        app.valid_write("PUT", &path, author, "New")
            .await
            .problem(404, "Book not found");
    }
    assert_eq!(app.total().await, 1);
}

pub async fn index_scheme_only(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_route_scheme(RouteScheme::Index)).await;
    let author = app.author("A").await;
    let id = app.book(author, "Indexed").await;
    app.get("/api/books").await.expect(200);
    app.get("/api/books/list")
        .await
        .problem(404, "Book not found");
    let reply = app
        .valid_write("POST", "/api/books/create", author, "x")
        .await;
    assert_eq!(
        reply.header("allow"),
        Some("DELETE, GET, HEAD, OPTIONS, PUT")
    );
    reply.problem(405, "Method not allowed");
    app.valid_write("PUT", &format!("/api/books/update/{id}"), author, "x")
        .await
        .problem(404, "Not found");
    app.send(
        "DELETE",
        &format!("/api/books/delete/{id}"),
        &[],
        Bytes::new(),
    )
    .await
    .problem(404, "Not found");
    app.valid_write("PUT", &format!("/api/books/{id}"), author, "Changed")
        .await
        .expect(200);
    app.send("DELETE", &format!("/api/books/{id}"), &[], Bytes::new())
        .await
        .expect(200);
}

pub async fn action_scheme_only(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_route_scheme(RouteScheme::Action)).await;
    let author = app.author("A").await;
    app.get("/api/ping").await.expect(200);
    app.get("/api/books").await.problem(404, "Not found");
    app.valid_write("POST", "/api/books", author, "x")
        .await
        .problem(404, "Not found");
    let created = app
        .valid_write("POST", "/api/books/create", author, "Acted")
        .await
        .expect(201);
    let id = created.json()["id"].as_i64().unwrap();
    assert_eq!(
        created.header("location"),
        Some(format!("{BASE}/api/books/{id}").as_str())
    );
    assert_eq!(
        app.get("/api/books/list").await.expect(200).json()["meta"]["total"],
        1
    );
    assert_eq!(
        app.get(&format!("/api/books/{id}"))
            .await
            .expect(200)
            .json()["title"],
        "Acted"
    );
    let put = app
        .valid_write("PUT", &format!("/api/books/{id}"), author, "x")
        .await;
    assert_eq!(put.header("allow"), Some("GET, HEAD, OPTIONS"));
    put.problem(405, "Method not allowed");
    let updated = app
        .valid_write("PUT", &format!("/api/books/update/{id}"), author, "Renamed")
        .await
        .expect(200);
    assert_eq!(updated.json()["title"], "Renamed");
    app.send("DELETE", &format!("/api/books/{id}"), &[], Bytes::new())
        .await
        .problem(405, "Method not allowed");
    let deleted = app
        .send(
            "DELETE",
            &format!("/api/books/delete/{id}"),
            &[],
            Bytes::new(),
        )
        .await
        .expect(200);
    assert_eq!(deleted.json(), json!({"id": id}));
}

pub async fn both_schemes_by_default(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let a = app
        .valid_write("POST", "/api/books", author, "Index")
        .await
        .expect(201)
        .json()["id"]
        .clone();
    let b = app
        .valid_write("POST", "/api/books/create", author, "Action")
        .await
        .expect(201)
        .json()["id"]
        .clone();
    assert_eq!(
        app.get("/api/books").await.expect(200).json()["meta"]["total"],
        2
    );
    assert_eq!(
        app.get("/api/books/list").await.expect(200).json()["meta"]["total"],
        2
    );
    app.valid_write("PUT", &format!("/api/books/{a}"), author, "A2")
        .await
        .expect(200);
    app.valid_write("PUT", &format!("/api/books/update/{b}"), author, "B2")
        .await
        .expect(200);
    app.send("DELETE", &format!("/api/books/{a}"), &[], Bytes::new())
        .await
        .expect(200);
    app.send(
        "DELETE",
        &format!("/api/books/delete/{b}"),
        &[],
        Bytes::new(),
    )
    .await
    .expect(200);
    assert_eq!(app.total().await, 0);
}

pub async fn custom_prefix_moves_every_route(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_prefix("/v1/")).await;
    let author = app.author("A").await;
    app.get("/v1/ping").await.expect(200);
    let created = app
        .valid_write("POST", "/v1/books", author, "Moved")
        .await
        .expect(201);
    let id = created.json()["id"].as_i64().unwrap();
    assert_eq!(
        created.header("location"),
        Some(format!("{BASE}/v1/books/{id}").as_str())
    );
    let page = app.get("/v1/books").await.expect(200).json();
    assert_eq!(page["links"]["self"], format!("{BASE}/v1/books?page=1"));
    assert_eq!(app.get("/api/ping").await.status, 404);
}

// ---------------------------------------------------------------- negotiation

pub async fn json_is_the_default_format(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for accept in [
        "*/*",
        "application/*",
        "application/json",
        "application/xml, application/json",
        "application/json;q=0.8, application/xml;q=0.8",
        "text/html;q=0.9, */*;q=0.1",
        "",
    ] {
        let reply = app.accept("/api/ping", accept).await.expect(200);
        assert_eq!(reply.header("content-type"), Some(JSON), "Accept: {accept}");
        assert_eq!(reply.json(), json!({"status": "ok"}));
    }
}

pub async fn accept_selects_xml(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for accept in [
        "application/xml",
        "text/xml",
        "text/*",
        "application/json;q=0.5, application/xml",
        "application/json;q=0, */*",
        "text/*;q=0.3, application/json;q=0.2",
    ] {
        let reply = app.accept("/api/ping", accept).await.expect(200);
        assert_eq!(reply.header("content-type"), Some(XML), "Accept: {accept}");
        assert_eq!(reply.header("vary"), Some("Accept"));
        let xml = reply.xml();
        assert_eq!(xml.name, "ping");
        xml.assert_mirrors(&json!({"status": "ok"}), "message");
    }
}

pub async fn accept_q_zero_and_specificity(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for accept in [
        "text/html",
        "image/*",
        "*/*;q=0",
        "application/json;q=0, application/xml;q=0, text/xml;q=0",
        "text/*, text/xml;q=0",
        "application/json;q=0, text/plain",
    ] {
        let body = app
            .accept("/api/books", accept)
            .await
            .problem(406, "Not acceptable");
        assert_eq!(body["title"], "Not Acceptable", "Accept: {accept}");
    }
}

pub async fn errors_follow_the_negotiated_format(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let reply = app
        .accept("/api/books/999", "application/xml")
        .await
        .expect(404);
    assert_eq!(reply.header("content-type"), Some(PROBLEM_XML));
    assert_eq!(reply.header("vary"), Some("Accept"));
    let xml = reply.xml();
    assert_eq!(xml.name, "problem");
    assert_eq!(xml.child("detail").unwrap().text, "Book not found");
    assert_eq!(xml.child("status").unwrap().text, "404");
    let reply = app
        .send("POST", "/api/ping", &[("accept", "text/xml")], Bytes::new())
        .await
        .expect(405);
    assert_eq!(reply.header("content-type"), Some(PROBLEM_XML));
    assert_eq!(
        reply.xml().child("detail").unwrap().text,
        "Method not allowed"
    );
}

// ---------------------------------------------------------------- create, read, update, delete

pub async fn create_returns_201_with_location(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("Frank Herbert").await;
    let reply = app
        .valid_write("POST", "/api/books", author, "Dune")
        .await
        .expect(201);
    assert_eq!(reply.header("content-type"), Some(JSON));
    let id = reply.json()["id"].as_i64().expect("id");
    assert_eq!(
        reply.header("location"),
        Some(format!("{BASE}/api/books/{id}").as_str())
    );
    assert_eq!(reply.json(), book_json(id, "Dune", 2021, JUNE, JUNE));
    let fetched = app.get(&format!("/api/books/{id}")).await.expect(200);
    assert_eq!(fetched.json(), reply.json());
    let untyped = form(&[
        ("title", "No type"),
        ("author_id", &author.to_string()),
        ("year", "2020"),
    ]);
    let reply = app
        .send("POST", "/api/books", &[], untyped)
        .await
        .expect(201);
    assert_eq!(
        reply.json()["title"],
        "No type",
        "a body without Content-Type is a form"
    );
}

pub async fn create_accepts_json_numbers_and_strings(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let numbers = app
        .json_body(
            "POST",
            "/api/books",
            json!({"title": "Numbers", "author_id": author, "year": 2020}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(
        (numbers["title"].clone(), numbers["year"].clone()),
        (json!("Numbers"), json!(2020))
    );
    let strings = app
        .json_body(
            "POST",
            "/api/books",
            json!({"title": "Strings", "author_id": author.to_string(), "year": "2019"}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(strings["year"], 2019);
    let charset = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", "application/json; charset=utf-8")],
            json!({"title": "Charset", "author_id": author, "year": 2018}).to_string(),
        )
        .await
        .expect(201);
    assert_eq!(charset.json()["title"], "Charset");
}

pub async fn create_accepts_multipart(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let part = |name: &str, value: &str| {
        format!("--b0undary\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
    };
    let body = format!(
        "{}{}{}{}--b0undary--\r\n",
        part("title", "Multi ✓"),
        part("author_id", &author.to_string()),
        part("ignored", "x"),
        part("year", "2022"),
    );
    let reply = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", "multipart/form-data; boundary=b0undary")],
            body,
        )
        .await
        .expect(201);
    assert_eq!(reply.json()["title"], "Multi ✓");
    assert_eq!(reply.json()["year"], 2022);
}

pub async fn create_ignores_unknown_fields_and_takes_last_repeat(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await.to_string();
    let reply = app
        .form(
            "POST",
            "/api/books",
            &[
                ("id", "999"),
                ("created_at", "1999-01-01 00:00:00"),
                ("title", "First"),
                ("title", "Second"),
                ("author_id", &author),
                ("year", "2001"),
                ("year", "2003"),
            ],
        )
        .await
        .expect(201)
        .json();
    assert_ne!(reply["id"], 999);
    assert_eq!(reply["title"], "Second");
    assert_eq!(reply["year"], 2003);
    assert_eq!(reply["created_at"], JUNE);
    let json = app
        .json_body(
            "POST",
            "/api/books",
            json!({"id": 999, "updated_at": "x", "title": "J", "author_id": author, "year": 2001}),
        )
        .await
        .expect(201)
        .json();
    assert_ne!(json["id"], 999);
    assert_eq!(json["updated_at"], JUNE);
}

pub async fn get_one_returns_the_book(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "  Trimmed title ").await;
    let reply = app.get(&format!("/api/books/{id}")).await.expect(200);
    assert_eq!(reply.header("content-type"), Some(JSON));
    assert_eq!(
        reply.json(),
        book_json(id, "Trimmed title", 2021, JUNE, JUNE)
    );
    app.get(&format!("/api/books/{}", id + 1))
        .await
        .problem(404, "Book not found");
}

pub async fn include_author_on_every_route(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("Frank Herbert").await;
    let expected = json!({"id": author, "name": "Frank Herbert"});
    let created = app
        .valid_write("POST", "/api/books?include=author", author, "Dune")
        .await
        .expect(201)
        .json();
    assert_eq!(created["author"], expected);
    let id = created["id"].as_i64().unwrap();
    assert_eq!(
        app.get(&format!("/api/books/{id}?include=author"))
            .await
            .expect(200)
            .json()["author"],
        expected
    );
    let page = app
        .get("/api/books?include=author")
        .await
        .expect(200)
        .json();
    assert_eq!(page["data"][0]["author"], expected);
    let updated = app
        .valid_write(
            "PUT",
            &format!("/api/books/{id}?include=author"),
            author,
            "Dune II",
        )
        .await
        .expect(200)
        .json();
    assert_eq!(updated["author"], expected);
    let list_action = app
        .get("/api/books/list?include=author")
        .await
        .expect(200)
        .json();
    assert_eq!(list_action["data"][0]["author"], expected);
    let plain = app
        .get(&format!("/api/books/{id}"))
        .await
        .expect(200)
        .json();
    assert!(
        plain.get("author").is_none(),
        "author only when included: {plain}"
    );
    let page = app.get("/api/books").await.expect(200).json();
    assert!(page["data"][0].get("author").is_none());
}

pub async fn include_author_is_null_without_name_or_author(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let nameless = app.harness.add_author(None).await;
    let leaving = app.author("Leaving").await;
    let a = app.book(nameless, "Nameless").await;
    let b = app.book(leaving, "Orphan").await;
    app.harness.remove_author(leaving).await;
    for id in [a, b] {
        let book = app
            .get(&format!("/api/books/{id}?include=author"))
            .await
            .expect(200)
            .json();
        assert_eq!(book["author"], Value::Null, "{book}");
    }
    let page = app
        .get("/api/books?include=author")
        .await
        .expect(200)
        .json();
    assert_eq!(page["data"][0]["author"], Value::Null);
    assert_eq!(page["data"][1]["author"], Value::Null);
}

pub async fn include_rejects_unknown_names(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "One").await;
    for (path, name) in [
        ("/api/books?include=publisher".to_owned(), "publisher"),
        (
            format!("/api/books/{id}?include=author.books"),
            "author.books",
        ),
        (
            "/api/books/list?include=author,publisher".to_owned(),
            "publisher",
        ),
    ] {
        let body = app
            .get(&path)
            .await
            .problem(400, "Invalid query parameter: include.");
        let message = body["errors"]["include"][0]
            .as_str()
            .expect("include message");
        assert!(
            message.contains(name) && message.contains("author"),
            "{message}"
        );
    }
    app.valid_write("POST", "/api/books?include=publisher", author, "Not stored")
        .await
        .problem(400, "Invalid query parameter: include.");
    assert_eq!(app.total().await, 1);
}

pub async fn include_tolerates_empty_whitespace_and_repeats(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "One").await;
    let none = app
        .get(&format!("/api/books/{id}?include="))
        .await
        .expect(200)
        .json();
    assert!(none.get("author").is_none());
    for query in [
        "include=%20author%20,author",
        "include=author,",
        "include=+author",
    ] {
        let book = app
            .get(&format!("/api/books/{id}?{query}"))
            .await
            .expect(200)
            .json();
        assert_eq!(book["author"]["id"], author, "{query}");
    }
}

pub async fn update_replaces_and_touches_updated_at(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let first = app.author("First").await;
    let second = app.author("Second").await;
    let id = app.book(first, "Before").await;
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 6, 16, 8, 30, 0).unwrap());
    let reply = app
        .form(
            "PUT",
            &format!("/api/books/{id}?include=author"),
            &[
                ("title", "After"),
                ("author_id", &second.to_string()),
                ("year", "2015"),
            ],
        )
        .await
        .expect(200);
    let mut expected = book_json(id, "After", 2015, JUNE, "2026-06-16 08:30:00");
    expected["author"] = json!({"id": second, "name": "Second"});
    assert_eq!(reply.json(), expected);
    let fetched = app
        .get(&format!("/api/books/{id}?include=author"))
        .await
        .expect(200)
        .json();
    assert_eq!(fetched, expected);
}

pub async fn update_validates_before_existence(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let errors = app.form("PUT", "/api/books/999", &[]).await.invalid();
    assert_eq!(errors["title"], json!(["The title field is required."]));
    app.valid_write("PUT", "/api/books/999", author, "x")
        .await
        .problem(404, "Book not found");
    assert_eq!(app.total().await, 0, "PUT never creates");
}

pub async fn delete_returns_id_and_removes(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let ids = app.seed(2).await;
    let path = format!("/api/books/{}", ids[0]);
    let reply = app
        .send("DELETE", &path, &[], Bytes::new())
        .await
        .expect(200);
    assert_eq!(reply.header("content-type"), Some(JSON));
    assert_eq!(reply.json(), json!({"id": ids[0]}));
    app.get(&path).await.problem(404, "Book not found");
    app.send("DELETE", &path, &[], Bytes::new())
        .await
        .problem(404, "Book not found");
    assert_eq!(app.total().await, 1);
    app.get(&format!("/api/books/{}", ids[1])).await.expect(200);
}

// ---------------------------------------------------------------- validation

pub async fn validation_title_rules(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let long = "a".repeat(256);
    for (value, message) in [
        (None, "The title field is required."),
        (Some(""), "The title field is required."),
        (Some("   "), "The title field is required."),
        (
            Some(long.as_str()),
            "The title may not be greater than 255 characters.",
        ),
        (
            Some("a\u{1}b"),
            "The title may not contain control characters.",
        ),
        (
            Some("tab\tinside"),
            "The title may not contain control characters.",
        ),
        (
            Some("del\u{7f}"),
            "The title may not contain control characters.",
        ),
    ] {
        let errors = app.errors_for("title", value).await;
        assert_eq!(errors, json!({"title": [message]}), "{value:?}");
    }
}

pub async fn validation_author_rules(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for (value, message) in [
        (None, "The author id field is required."),
        (Some(""), "The author id field is required."),
        (Some("abc"), "The author id must be an integer."),
        (Some("1.5"), "The author id must be an integer."),
        (Some("1e3"), "The author id must be an integer."),
        (Some("999999"), "The selected author id is invalid."),
        (Some("0"), "The selected author id is invalid."),
        (Some("-1"), "The selected author id is invalid."),
        (
            Some("99999999999999999999"),
            "The selected author id is invalid.",
        ),
    ] {
        let errors = app.errors_for("author_id", value).await;
        assert_eq!(errors, json!({"author_id": [message]}), "{value:?}");
    }
}

pub async fn validation_year_rules(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for (value, message) in [
        (None, "The year field is required."),
        (Some(""), "The year field is required."),
        (Some("abc"), "The year must be an integer."),
        (Some("2005.0"), "The year must be an integer."),
        (Some("1e3"), "The year must be an integer."),
        (Some("1999"), "The year must be at least 2000."),
        (Some("-5"), "The year must be at least 2000."),
        (Some("2027"), "The year may not be greater than 2026."),
        (
            Some("99999999999999999999"),
            "The year may not be greater than 2026.",
        ),
    ] {
        let errors = app.errors_for("year", value).await;
        assert_eq!(errors, json!({"year": [message]}), "{value:?}");
    }
}

pub async fn validation_reports_every_field_at_once(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let errors = app.form("POST", "/api/books", &[]).await.invalid();
    assert_eq!(
        errors,
        json!({
            "title": ["The title field is required."],
            "author_id": ["The author id field is required."],
            "year": ["The year field is required."],
        })
    );
    let long = "x".repeat(300);
    let errors = app
        .form(
            "POST",
            "/api/books",
            &[("title", &long), ("author_id", "424242"), ("year", "1990")],
        )
        .await
        .invalid();
    assert_eq!(
        errors,
        json!({
            "title": ["The title may not be greater than 255 characters."],
            "author_id": ["The selected author id is invalid."],
            "year": ["The year must be at least 2000."],
        })
    );
}

pub async fn validation_json_types(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let errors = app
        .json_body(
            "POST",
            "/api/books",
            json!({"title": null, "author_id": true, "year": 2005.5}),
        )
        .await
        .invalid();
    assert_eq!(
        errors,
        json!({
            "title": ["The title field is required."],
            "author_id": ["The author id must be an integer."],
            "year": ["The year must be an integer."],
        })
    );
    let errors = app
        .json_body(
            "POST",
            "/api/books",
            json!({"title": ["x"], "author_id": [1], "year": {"y": 1}}),
        )
        .await
        .invalid();
    assert_eq!(
        errors,
        json!({
            "title": ["The title must be a string."],
            "author_id": ["The author id must be an integer."],
            "year": ["The year must be an integer."],
        })
    );
    let author = app.author("A").await;
    let errors = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", JSON)],
            format!(r#"{{"title": "T", "author_id": {author}, "year": 2005.0}}"#),
        )
        .await
        .invalid();
    assert_eq!(errors, json!({"year": ["The year must be an integer."]}));
}

pub async fn validation_stores_nothing(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await.to_string();
    app.form(
        "POST",
        "/api/books",
        &[("title", "T"), ("author_id", &author), ("year", "1999")],
    )
    .await
    .invalid();
    app.form(
        "POST",
        "/api/books",
        &[("title", ""), ("author_id", &author), ("year", "2001")],
    )
    .await
    .invalid();
    assert_eq!(app.total().await, 0);
}

pub async fn title_of_255_and_256_unicode_characters(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    for title in ["é".repeat(255), "😀".repeat(255), "a".repeat(255)] {
        let reply = app
            .valid_write("POST", "/api/books", author, &title)
            .await
            .expect(201);
        assert_eq!(reply.json()["title"], title.as_str());
    }
    for title in ["é".repeat(256), "😀".repeat(256)] {
        let errors = app
            .valid_write("POST", "/api/books", author, &title)
            .await
            .invalid();
        assert_eq!(
            errors,
            json!({"title": ["The title may not be greater than 255 characters."]})
        );
    }
    assert_eq!(app.total().await, 3);
}

pub async fn year_bound_follows_the_clock(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await.to_string();
    let post = |year: &'static str| {
        let author = author.clone();
        let app = &app;
        async move {
            app.form(
                "POST",
                "/api/books",
                &[("title", "T"), ("author_id", &author), ("year", year)],
            )
            .await
        }
    };
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap());
    post("2026").await.expect(201);
    let errors = post("2027").await.invalid();
    assert_eq!(
        errors,
        json!({"year": ["The year may not be greater than 2026."]})
    );
    app.clock
        .set(Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap());
    let created = post("2027").await.expect(201).json();
    assert_eq!(created["created_at"], "2027-01-01 00:00:00");
    let errors = post("2028").await.invalid();
    assert_eq!(
        errors,
        json!({"year": ["The year may not be greater than 2027."]})
    );
}

// ---------------------------------------------------------------- bodies

pub async fn body_of_unsupported_type_is_415(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let body = valid(author, "T");
    for content_type in [
        "text/plain",
        "application/xml",
        "not a type",
        "application/jsonx",
    ] {
        app.send(
            "POST",
            "/api/books",
            &[("content-type", content_type)],
            body.clone(),
        )
        .await
        .problem(415, "Unsupported media type");
    }
    app.send("PUT", "/api/books/1", &[("content-type", "text/csv")], body)
        .await
        .problem(415, "Unsupported media type");
    assert_eq!(app.total().await, 0);
}

pub async fn undecodable_body_is_400(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let cases: [(&str, &[u8]); 7] = [
        (FORM, b"title=%FF&author_id=1&year=2001"),
        (FORM, b"title=\xff\xfe&author_id=1&year=2001"),
        (JSON, b"{"),
        (JSON, b"[1, 2]"),
        (JSON, b"\"just a string\""),
        (JSON, b"{\"title\": \"\xff\"}"),
        ("multipart/form-data; boundary=zz", b"--zz\r\nbroken"),
    ];
    for (content_type, body) in cases {
        let body = app
            .send(
                "POST",
                "/api/books",
                &[("content-type", content_type)],
                Bytes::from_static(body),
            )
            .await
            .expect(400)
            .json();
        assert_eq!(body["title"], "Bad Request");
        assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    assert_eq!(app.total().await, 0);
}

pub async fn body_too_large_is_413(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_body_limit(1024)).await;
    let author = app.author("A").await;
    let exact = |len: usize| {
        let mut body = valid(author, "Sized");
        body.push_str("&pad=");
        let pad = len - body.len();
        body + &"p".repeat(pad)
    };
    let at_limit = exact(1024);
    assert_eq!(at_limit.len(), 1024);
    app.send("POST", "/api/books", &[("content-type", FORM)], at_limit)
        .await
        .expect(201);
    app.send("POST", "/api/books", &[("content-type", FORM)], exact(1025))
        .await
        .problem(413, "Payload too large");
    app.send(
        "POST",
        "/api/books",
        &[("content-type", JSON)],
        "x".repeat(100_000),
    )
    .await
    .problem(413, "Payload too large");
    assert_eq!(app.total().await, 1);
}

// ---------------------------------------------------------------- pagination

pub async fn pagination_first_middle_last_beyond(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let ids = app.seed(45).await;
    let url = |page: u64| format!("{BASE}/api/books?page={page}");
    let app = &app;
    let page_of = |n: u64| async move {
        let path = if n == 1 {
            "/api/books".to_owned()
        } else {
            format!("/api/books?page={n}")
        };
        app.get(&path).await.expect(200).json()
    };
    let expectations: [(u64, std::ops::Range<usize>, Value, Value); 4] = [
        (1, 0..20, Value::Null, json!(url(2))),
        (2, 20..40, json!(url(1)), json!(url(3))),
        (3, 40..45, json!(url(2)), Value::Null),
        (4, 45..45, json!(url(3)), Value::Null),
    ];
    for (page, range, prev, next) in expectations {
        let body = page_of(page).await;
        let data_ids: Vec<i64> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["id"].as_i64().unwrap())
            .collect();
        assert_eq!(data_ids, ids[range], "page {page}");
        assert_eq!(
            body["meta"],
            json!({"page": page, "perPage": 20, "total": 45, "totalPages": 3})
        );
        assert_eq!(
            body["links"],
            json!({"self": url(page), "first": url(1), "last": url(3), "prev": prev, "next": next}),
            "page {page}"
        );
    }
    let first = page_of(1).await;
    assert_eq!(
        first["data"][0],
        book_json(ids[0], "Book 0", 2021, JUNE, JUNE)
    );
}

pub async fn pagination_invalid_page_is_400(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for page in ["0", "-1", "abc", "1.5", "", "99999999999999999999", "%FF"] {
        let body = app
            .get(&format!("/api/books?page={page}"))
            .await
            .problem(400, "Invalid query parameter: page.");
        assert_eq!(
            body["errors"],
            json!({"page": ["The page must be an integer of at least 1."]}),
            "page={page}"
        );
    }
    let both = app
        .get("/api/books?page=0&include=nope")
        .await
        .problem(400, "Invalid query parameters: page, include.");
    assert!(both["errors"]["page"].is_array() && both["errors"]["include"].is_array());
}

pub async fn pagination_of_empty_store(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let body = app.get("/api/books").await.expect(200).json();
    let first = format!("{BASE}/api/books?page=1");
    assert_eq!(
        body,
        json!({
            "data": [],
            "meta": {"page": 1, "perPage": 20, "total": 0, "totalPages": 1},
            "links": {"self": first, "first": first, "last": first, "prev": null, "next": null},
        })
    );
    let beyond = app.get("/api/books?page=2").await.expect(200).json();
    assert_eq!(beyond["links"]["prev"], json!(first));
}

pub async fn pagination_links_keep_include(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    app.seed(25).await;
    let url = |page: u64| format!("{BASE}/api/books?page={page}&include=author");
    let body = app
        .get("/api/books?page=2&include=%20author,author")
        .await
        .expect(200)
        .json();
    assert_eq!(
        body["links"],
        json!({"self": url(2), "first": url(1), "last": url(2), "prev": url(1), "next": null})
    );
    assert_eq!(body["data"][0]["author"]["name"], "Seed Author");
    let empty = app.get("/api/books?include=").await.expect(200).json();
    assert_eq!(empty["links"]["next"], format!("{BASE}/api/books?page=2"));
}

pub async fn pagination_links_ignore_host_headers(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    app.seed(21).await;
    let body = app
        .send(
            "GET",
            "/api/books",
            &[
                ("host", "evil.example"),
                ("x-forwarded-host", "evil.example"),
                ("x-forwarded-proto", "https"),
                ("forwarded", "host=evil.example;proto=https"),
            ],
            Bytes::new(),
        )
        .await
        .expect(200)
        .json();
    for link in ["self", "first", "last", "next"] {
        let url = body["links"][link].as_str().unwrap();
        assert!(
            url.starts_with(&format!("{BASE}/api/books?page=")),
            "{link}: {url}"
        );
    }
}

pub async fn pagination_page_size_is_configurable(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_page_size(NonZeroU32::new(7).unwrap())).await;
    let ids = app.seed(15).await;
    let body = app.get("/api/books?page=3").await.expect(200).json();
    assert_eq!(
        body["meta"],
        json!({"page": 3, "perPage": 7, "total": 15, "totalPages": 3})
    );
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    assert_eq!(body["data"][0]["id"], ids[14]);
}

pub async fn action_list_links_use_action_path(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    app.seed(1).await;
    let body = app
        .get("/api/books/list?include=author")
        .await
        .expect(200)
        .json();
    assert_eq!(
        body["links"]["self"],
        format!("{BASE}/api/books/list?page=1&include=author")
    );
}

// ---------------------------------------------------------------- XML

pub async fn xml_book_mirrors_json(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("Smith & <Sons> \"Ltd\"").await;
    let id = app.book(author, "Dune & <Co> 'quoted' ✓").await;
    let nameless = app.harness.add_author(None).await;
    let other = app.book(nameless, "Nameless").await;
    for id in [id, other] {
        let path = format!("/api/books/{id}?include=author");
        let json = app.get(&path).await.expect(200).json();
        let reply = app.accept(&path, "application/xml").await.expect(200);
        assert_eq!(reply.header("content-type"), Some(XML));
        let xml = reply.xml();
        assert_eq!(xml.name, "book");
        xml.assert_mirrors(&json, "book");
    }
}

pub async fn xml_page_mirrors_json(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_page_size(NonZeroU32::new(2).unwrap())).await;
    app.seed(3).await;
    let path = "/api/books?page=2&include=author";
    let json = app.get(path).await.expect(200).json();
    let xml = app.accept(path, "text/xml").await.expect(200).xml();
    assert_eq!(xml.name, "books");
    xml.assert_mirrors(&json, "book");
    assert_eq!(xml.child("data").unwrap().children.len(), 1);
    let empty = app
        .accept("/api/books?page=9", "application/xml")
        .await
        .expect(200)
        .xml();
    assert!(empty.child("data").unwrap().children.is_empty());
}

pub async fn xml_error_mirrors_json(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let bad = form(&[("title", "<bad & \u{1}>"), ("year", "1999")]);
    let json = app
        .send("POST", "/api/books", &[("content-type", FORM)], bad.clone())
        .await
        .invalid();
    let reply = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", FORM), ("accept", "application/xml")],
            bad,
        )
        .await
        .expect(422);
    let xml = reply.xml_problem();
    xml.child("errors")
        .unwrap()
        .assert_mirrors(&json, "message");
    let not_found = app.accept("/api/books/77", "application/xml").await;
    let json_404 = app
        .get("/api/books/77")
        .await
        .problem(404, "Book not found");
    not_found
        .expect(404)
        .xml_problem()
        .assert_mirrors(&json_404, "message");
}

// ---------------------------------------------------------------- write token

pub async fn write_token_guards_writes_only(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_write_token(Some("s3cret"))).await;
    let author = app.author("A").await;
    let body = valid(author, "Guarded");
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("s3cret"),
        Some("Basic s3cret"),
        Some("Bearer "),
    ] {
        let mut headers = vec![("content-type", FORM)];
        headers.extend(auth.map(|a| ("authorization", a)));
        let reply = app.send("POST", "/api/books", &headers, body.clone()).await;
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{auth:?}");
        reply.problem(401, "A valid bearer token is required to write.");
        for method in ["PUT", "DELETE"] {
            app.send(method, "/api/books/1", &headers, body.clone())
                .await
                .problem(401, "A valid bearer token is required to write.");
        }
    }
    assert_eq!(app.total().await, 0, "reads stay open; nothing was written");
    let authorized = [("content-type", FORM), ("authorization", "Bearer s3cret")];
    let id = app
        .send("POST", "/api/books", &authorized, body.clone())
        .await
        .expect(201)
        .json()["id"]
        .clone();
    app.send("PUT", &format!("/api/books/{id}"), &authorized, body)
        .await
        .expect(200);
    app.get(&format!("/api/books/{id}")).await.expect(200);
    app.send(
        "DELETE",
        &format!("/api/books/{id}"),
        &authorized,
        Bytes::new(),
    )
    .await
    .expect(200);
}

// ---------------------------------------------------------------- hostile input

pub async fn targets_without_a_path_are_not_found(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    // Authority form (`CONNECT host:port`): hyper accepts it with any method, and warp
    // 0.4's path filters panic on it. It names nothing under the prefix.
    for method in ["CONNECT", "GET", "POST"] {
        let reply = app.send(method, "127.0.0.1:5432", &[], Bytes::new()).await;
        assert_eq!(reply.status, 404, "{method} in authority form");
    }
    app.get("/api/ping").await.expect(200);
}

pub async fn titles_xml_cannot_carry_are_refused(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    for title in ["bad\u{ffff}char", "\u{fffe}lead", "nul\u{0}"] {
        let errors = app
            .json_body(
                "POST",
                "/api/books",
                json!({"title": title, "author_id": author, "year": 2020}),
            )
            .await
            .invalid();
        assert_eq!(
            errors,
            json!({"title": ["The title may not contain control characters."]}),
            "{title:?}"
        );
        let errors = app.errors_for("title", Some(title)).await;
        assert_eq!(
            errors,
            json!({"title": ["The title may not contain control characters."]})
        );
    }
    assert_eq!(app.total().await, 0);
}

pub async fn stored_text_xml_cannot_carry_is_replaced(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    // A host can write any string into its tables; the author name stands for that.
    let author = app.author("bad\u{1}\u{ffff}\u{fffe}name\r\u{1b}").await;
    let id = app.book(author, "Fine").await;
    let shown = "bad\u{fffd}\u{fffd}\u{fffd}name\r\u{fffd}";
    for path in [
        format!("/api/books/{id}?include=author"),
        "/api/books?include=author".to_owned(),
    ] {
        let json = app.get(&path).await.expect(200).json();
        let book = if json["data"].is_array() {
            json["data"][0].clone()
        } else {
            json.clone()
        };
        assert_eq!(book["author"]["name"], shown, "{path}");
        let xml = app.accept(&path, "application/xml").await.expect(200).xml();
        xml.assert_mirrors(&json, "book");
    }
}

pub async fn echoed_include_xml_cannot_carry_is_replaced(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for (raw, shown) in [
        ("%01", "\u{fffd}"),
        ("%00x", "\u{fffd}x"),
        ("%1b", "\u{fffd}"),
        ("%EF%BF%BF", "\u{fffd}"),
        ("a%EF%BF%BEb", "a\u{fffd}b"),
    ] {
        let path = format!("/api/books?include={raw}");
        let json = app
            .get(&path)
            .await
            .problem(400, "Invalid query parameter: include.");
        let message = json["errors"]["include"][0].as_str().expect("message");
        assert!(
            message.starts_with(&format!("Unknown include: {shown}.")),
            "{raw}: {message:?}"
        );
        let reply = app.accept(&path, "application/xml").await.expect(400);
        reply.xml_problem().assert_mirrors(&json, "message");
    }
}

pub async fn json_integers_beyond_64_bits_fail_the_range_rule(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let huge = "100000000000000000000000";
    let form_errors = app.errors_for("year", Some(huge)).await;
    assert_eq!(
        form_errors,
        json!({"year": ["The year may not be greater than 2026."]})
    );
    let author = app.author("A").await;
    let errors = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", JSON)],
            format!(r#"{{"title": "T", "author_id": {author}, "year": {huge}}}"#),
        )
        .await
        .invalid();
    assert_eq!(errors, form_errors);
    let errors = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", JSON)],
            format!(r#"{{"title": "T", "author_id": -{huge}, "year": 1e3}}"#),
        )
        .await
        .invalid();
    assert_eq!(
        errors,
        json!({
            "author_id": ["The selected author id is invalid."],
            "year": ["The year must be an integer."],
        })
    );
}

// ---------------------------------------------------------------- request ids

pub async fn request_ids_are_echoed_or_made(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let given = "client-7f3a:b/c=d@e";
    for (method, path, accept) in [
        ("GET", "/api/ping", "application/json"),
        ("GET", "/api/books/999", "application/json"),
        ("GET", "/api/books", "image/png"),
        ("OPTIONS", "/api/books", "application/json"),
        ("PATCH", "/api/books", "application/json"),
        ("GET", "/api/nope", "application/xml"),
    ] {
        let headers = [("x-request-id", given), ("accept", accept)];
        let reply = app.send(method, path, &headers, Bytes::new()).await;
        assert_eq!(reply.header("x-request-id"), Some(given), "{method} {path}");
        if reply.status >= 400 {
            let instance = format!("urn:request:{given}");
            match reply.header("content-type") {
                Some(PROBLEM_XML) => {
                    assert_eq!(reply.xml().child("instance").unwrap().text, instance)
                }
                _ => assert_eq!(reply.json()["instance"], instance, "{method} {path}"),
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    let long = "x".repeat(65);
    for unusable in ["has space", "<script>", "quote\"", long.as_str(), ""] {
        let reply = app
            .send(
                "GET",
                "/api/ping",
                &[("x-request-id", unusable)],
                Bytes::new(),
            )
            .await
            .expect(200);
        let made = reply.header("x-request-id").expect("a new id");
        assert_ne!(made, unusable);
        assert!((1..=64).contains(&made.len()), "{made:?}");
        seen.insert(made.to_owned());
    }
    let made = app.get("/api/ping").await;
    seen.insert(made.header("x-request-id").expect("an id").to_owned());
    assert_eq!(seen.len(), 6, "every request gets its own id: {seen:?}");
}
