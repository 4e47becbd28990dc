//! Bodies, validation, and input crafted to break things.

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
