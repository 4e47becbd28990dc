//! Bodies (types, encodings, sizes) and input crafted to break things.

use super::*;

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
