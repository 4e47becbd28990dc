//! Property tests: whatever a client sends, the API answers with a well-formed body and
//! never panics or fails with a 500.

use books_core::Config;
use books_core::store::AuthorStore;
use books_core::testing::{InProcess, XmlNode};
use books_memstore::MemStore;
use bytes::Bytes;
use http::Request;
use proptest::prelude::*;

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("GET".to_owned()),
        Just("HEAD".to_owned()),
        Just("POST".to_owned()),
        Just("PUT".to_owned()),
        Just("DELETE".to_owned()),
        Just("OPTIONS".to_owned()),
        Just("PATCH".to_owned()),
        "[A-Z]{1,10}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("api".to_owned()),
        Just("books".to_owned()),
        Just("ping".to_owned()),
        Just("list".to_owned()),
        Just("create".to_owned()),
        Just("update".to_owned()),
        Just("delete".to_owned()),
        Just("1".to_owned()),
        Just("".to_owned()),
        "-?[0-9]{1,25}",
        "[a-zA-Z0-9%._~-]{0,12}",
    ];
    let query = prop_oneof![
        Just(String::new()),
        "\\?(page|include|x)=[a-z0-9,.%+-]{0,10}(&(page|include)=[a-z0-9,%]{0,6})?",
    ];
    (proptest::collection::vec(segment, 0..5), query)
        .prop_map(|(segments, query)| format!("/{}{query}", segments.join("/")))
}

fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("application/json".to_owned()),
        Just("application/xml".to_owned()),
        Just("multipart/form-data; boundary=b".to_owned()),
        Just("application/x-www-form-urlencoded".to_owned()),
        "[ -~]{0,40}",
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        "(title|author_id|year|x)=[^&]{0,20}(&(title|author_id|year)=[0-9a-z%]{0,8}){0,3}"
            .prop_map(String::into_bytes),
        "\\{\"(title|year|author_id)\": ?(null|true|[0-9.e-]{1,8}|\"[^\"]{0,8}\"|\\[\\])\\}"
            .prop_map(String::into_bytes),
        "--b\r\nContent-Disposition: form-data; name=\"(title|year)\"\r\n\r\n[a-z0-9]{0,8}\r\n(--b--)?"
            .prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_request_gets_a_well_formed_answer(
        method in method(),
        path in path(),
        accept in proptest::option::of(header_value()),
        content_type in proptest::option::of(header_value()),
        body in body(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let store = MemStore::new();
            let author = store.add_author(Some("A")).await.unwrap();
            let harness = InProcess::new(store, Config::default().with_body_limit(128));
            let api = harness.api();
            let seed = format!("title=Seed&author_id={author}&year=2020");
            let seeded = api
                .handle(Request::post("/api/books").body(seed).unwrap())
                .await;
            prop_assert_eq!(seeded.status(), 201);

            let mut request = Request::builder().method(method.as_str()).uri(path.as_str());
            if let Some(accept) = &accept {
                request = request.header("accept", accept.as_str());
            }
            if let Some(content_type) = &content_type {
                request = request.header("content-type", content_type.as_str());
            }
            let request = request.body(String::from_utf8_lossy(&body).into_owned());
            let Ok(request) = request else { return Ok(()) };
            let response = api.handle(request).await;
            let status = response.status().as_u16();
            prop_assert!(status < 500, "{} {} -> {}", method, path, status);
            let content_type = response
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let body: &Bytes = response.body();
            if method == "HEAD" || status == 204 {
                prop_assert!(body.is_empty());
            } else if content_type.contains("json") {
                let value: serde_json::Value = serde_json::from_slice(body).unwrap();
                if status >= 400 {
                    prop_assert_eq!(&value["status"], &serde_json::json!(status));
                    prop_assert!(value["detail"].is_string());
                }
            } else {
                prop_assert!(content_type.contains("xml"), "content type {:?}", content_type);
                let root = XmlNode::parse(body);
                if status >= 400 {
                    prop_assert_eq!(root.name.as_str(), "problem");
                }
            }
            Ok(())
        })?;
    }
}
