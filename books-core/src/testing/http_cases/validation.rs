//! The create and update rules: each field's messages, every failing field at once,
//! nothing stored, the title's length in characters, the year's bound by the clock.

use super::*;

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
