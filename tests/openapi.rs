//! The OpenAPI document (`books-core/docs/openapi.json`) against what the code serves:
//! every documented path and method is served and every other method on it is 405; each
//! operation's success and error answers have a documented status and media type, and
//! their JSON bodies fit the documented schemas.

use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use http::{Request, Response};
use serde_json::Value;

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"];

fn document() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/books-core/docs/openapi.json"
    ))
    .expect("the document");
    serde_json::from_str(&text).expect("JSON")
}

/// A fresh API over the demo data (authors 1..=50, books 1..=45).
async fn api() -> BooksApi {
    let store = MemStore::new();
    books_core::demo::load_if_empty(&store, chrono::Utc::now())
        .await
        .unwrap();
    BooksApi::new(store, Config::default())
}

async fn send(method: &str, path: &str, accept: &str, body: &str) -> Response<bytes::Bytes> {
    let request = Request::builder()
        .method(method)
        .uri(format!("/api{path}"))
        .header("accept", accept)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_owned())
        .unwrap();
    api().await.handle(request).await
}

/// Follows a `$ref` into the document.
fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str() {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').expect("local reference");
            resolve(
                document,
                document.pointer(pointer).expect("reference resolves"),
            )
        }
        None => value,
    }
}

/// Checks `value` against the subset of JSON Schema the document uses.
fn fits(document: &Value, schema: &Value, value: &Value, at: &str) {
    let schema = resolve(document, schema);
    if let Some(expected) = schema.get("const") {
        assert_eq!(value, expected, "{at}");
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    assert!(
        types.is_empty() || types.contains(&kind),
        "{at}: {kind}, not {types:?}"
    );
    if let Value::Object(members) = value {
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap();
            assert!(members.contains_key(name), "{at}: {name} missing");
        }
        for (name, member) in members {
            let at = format!("{at}.{name}");
            match (&schema["properties"][name], &schema["additionalProperties"]) {
                (Value::Null, Value::Bool(false)) => panic!("{at}: not in the schema"),
                (Value::Null, Value::Null) => {}
                (Value::Null, extra) => fits(document, extra, member, &at),
                (property, _) => fits(document, property, member, &at),
            }
        }
    }
    if let (Value::Array(items), Some(item)) = (value, schema.get("items")) {
        for (i, value) in items.iter().enumerate() {
            fits(document, item, value, &format!("{at}[{i}]"));
        }
    }
}

/// Checks an answer against the operation's documented responses.
fn conforms(document: &Value, operation: &Value, response: &Response<bytes::Bytes>, at: &str) {
    let status = response.status().as_str().to_owned();
    let documented = resolve(document, &operation["responses"][&status]);
    assert!(!documented.is_null(), "{at}: status {status} undocumented");
    let body = response.body();
    if body.is_empty() {
        return;
    }
    let content_type = response.headers()["content-type"].to_str().unwrap();
    let media = content_type.split(';').next().unwrap().trim();
    let schema = &documented["content"][media]["schema"];
    assert!(!schema.is_null(), "{at}: {status} as {media} undocumented");
    if media.ends_with("json") {
        let value: Value = serde_json::from_slice(body).unwrap();
        fits(document, schema, &value, &format!("{at} {status}"));
    }
}

#[tokio::test]
async fn documented_methods_are_exactly_the_served_ones() {
    let document = document();
    for (template, item) in document["paths"].as_object().unwrap() {
        let path = template.replace("{id}", "3");
        for method in METHODS {
            let operation = &item[method.to_lowercase()];
            let response = send(method, &path, "*/*", "title=T&author_id=1&year=2020").await;
            let at = format!("{method} {template}");
            if operation.is_null() {
                assert_eq!(response.status(), 405, "{at}: served but undocumented");
            } else {
                assert_ne!(response.status(), 405, "{at}: documented but not served");
                conforms(&document, operation, &response, &at);
            }
        }
    }
}

#[tokio::test]
async fn error_answers_are_documented() {
    let document = document();
    for (template, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            if method == "OPTIONS" || template == "/openapi.json" {
                continue;
            }
            let params: Vec<&str> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| resolve(&document, p)["name"].as_str().unwrap())
                .collect();
            let path = template.replace("{id}", "3");
            let mut probes = vec![(path.clone(), "application/json;q=0", "", 406)];
            if params.contains(&"include") {
                probes.push((format!("{path}?include=publisher"), "*/*", "", 400));
            }
            if params.contains(&"page") {
                probes.push((format!("{path}?page=0"), "*/*", "", 400));
            }
            if params.contains(&"id") {
                let body = "title=T&author_id=1&year=2020";
                probes.push((template.replace("{id}", "999999"), "*/*", body, 404));
            }
            if !operation["requestBody"].is_null() {
                probes.push((path.clone(), "application/xml", "year=1999", 422));
            }
            for (path, accept, body, expected) in probes {
                let response = send(&method, &path, accept, body).await;
                let at = format!("{method} {path} (Accept: {accept})");
                assert_eq!(response.status(), expected, "{at}");
                conforms(&document, operation, &response, &at);
            }
        }
    }
}

#[tokio::test]
async fn the_api_serves_the_document_with_its_own_server_url() {
    let config = Config::default()
        .with_prefix("/v2")
        .with_base_url("https://books.example.com");
    let api = BooksApi::new(MemStore::new(), config.clone());
    let request = Request::get("/v2/openapi.json")
        .body(String::new())
        .unwrap();
    let response = api.handle(request).await;
    assert_eq!(response.status(), 200);
    let served: Value = serde_json::from_slice(response.body()).unwrap();
    assert_eq!(served["servers"][0]["url"], "https://books.example.com/v2");
    assert_eq!(served["paths"], document()["paths"]);

    let off = BooksApi::new(MemStore::new(), config.with_openapi(false));
    let request = Request::get("/v2/openapi.json")
        .body(String::new())
        .unwrap();
    assert_eq!(off.handle(request).await.status(), 404);
}
