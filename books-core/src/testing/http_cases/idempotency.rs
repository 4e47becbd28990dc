//! `Idempotency-Key` on creates (replays, 422, 409, 400), each bullet of the contract's
//! section on idempotent creates; without the store's idempotent creates tier, the
//! documented 501.

use super::*;

/// The 501 of a create with a key over a store without idempotent creates.
const KEYS_UNSERVED: &str = "This server cannot honour Idempotency-Key: its store keeps no \
    keys. Send the create without it.";

/// A keyed create with this key, form body.
async fn keyed(app: &App<impl Harness>, path: &str, key: &str, body: String) -> Reply {
    let headers = [("content-type", FORM), ("idempotency-key", key)];
    app.send("POST", path, &headers, body).await
}

pub async fn idempotent_creates_replay_their_answer(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if keys_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let first = keyed(
        &app,
        "/api/books?include=author",
        "order-1",
        valid(author, "Once"),
    )
    .await;
    let first = first.expect(201);
    assert_eq!(first.header("idempotent-replayed"), None);
    let total = app.total().await;
    for accept in ["application/json", "application/xml"] {
        let headers = [
            ("content-type", FORM),
            ("idempotency-key", "order-1"),
            ("accept", accept),
        ];
        let again = app
            .send(
                "POST",
                "/api/books?include=author",
                &headers,
                valid(author, "Once"),
            )
            .await
            .expect(201);
        assert_eq!(
            again.body, first.body,
            "byte for byte, in the format first answered"
        );
        for name in ["content-type", "location", "etag", "vary"] {
            assert_eq!(again.header(name), first.header(name), "{name}");
        }
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
    }
    assert_eq!(app.total().await, total, "nothing created again");
    // One trailing slash is the same route.
    let slash = keyed(
        &app,
        "/api/books/?include=author",
        "order-1",
        valid(author, "Once"),
    );
    assert_eq!(slash.await.expect(201).body, first.body);
    // A quoted key is the same key.
    let quoted = keyed(
        &app,
        "/api/books?include=author",
        "\"order-1\"",
        valid(author, "Once"),
    );
    assert_eq!(quoted.await.expect(201).body, first.body);
    // Other keys, or none, create again.
    keyed(&app, "/api/books", "order-2", valid(author, "Once"))
        .await
        .expect(201);
    app.valid_write("POST", "/api/books", author, "Once")
        .await
        .expect(201);
    assert_eq!(app.total().await, total + 2);
}

pub async fn idempotency_key_reused_with_another_request_is_422(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if keys_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    keyed(&app, "/api/books", "k", valid(author, "Original"))
        .await
        .expect(201);
    let total = app.total().await;
    let other_body = keyed(&app, "/api/books", "k", valid(author, "Different")).await;
    other_body.problem(422, "Idempotency key reused with a different request");
    let other_route = keyed(&app, "/api/books/create", "k", valid(author, "Original")).await;
    other_route.problem(422, "Idempotency key reused with a different request");
    let headers = [("content-type", JSON), ("idempotency-key", "k")];
    let body = json!({"title": "Original", "author_id": author, "year": 2021}).to_string();
    let other_type = app.send("POST", "/api/books", &headers, body).await;
    other_type.problem(422, "Idempotency key reused with a different request");
    assert_eq!(app.total().await, total);
}

pub async fn malformed_idempotency_keys_are_400(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let long = "k".repeat(256);
    for key in ["", "two words", "\"unterminated", long.as_str(), "\"a\"b\""] {
        let headers = [("content-type", FORM), ("idempotency-key", key)];
        let reply = app
            .send("POST", "/api/books", &headers, valid(author, "B"))
            .await;
        let body = reply.problem(400, "Invalid Idempotency-Key header: 1 to 255 visible ASCII characters, as a token or a quoted string.");
        assert!(body["detail"].as_str().unwrap().contains("Idempotency-Key"));
    }
    assert_eq!(app.total().await, 0);
    let longest = "k".repeat(255);
    let reply = keyed(&app, "/api/books", &longest, valid(author, "B")).await;
    match app.harness.tiers().idempotent_creates {
        true => drop(reply.expect(201)),
        false => drop(reply.problem(501, KEYS_UNSERVED)),
    }
}

pub async fn failed_creates_leave_their_key_unused(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if keys_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let invalid = form(&[
        ("title", ""),
        ("author_id", &author.to_string()),
        ("year", "2021"),
    ]);
    keyed(&app, "/api/books", "retry-me", invalid)
        .await
        .invalid();
    let missing_author = keyed(&app, "/api/books", "retry-me", valid(author + 100, "B"));
    missing_author.await.invalid();
    let fixed = keyed(&app, "/api/books", "retry-me", valid(author, "Fixed"))
        .await
        .expect(201);
    let again = keyed(&app, "/api/books", "retry-me", valid(author, "Fixed"))
        .await
        .expect(201);
    assert_eq!(again.body, fixed.body);
    assert_eq!(app.total().await, 1);
}

pub async fn concurrent_requests_with_one_key_create_one_book(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if keys_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let sends = (0..16).map(|_| keyed(&app, "/api/books", "same", valid(author, "Raced")));
    let replies = futures_util::future::join_all(sends).await;
    let mut ids = std::collections::HashSet::new();
    for reply in &replies {
        match reply.status {
            201 => {
                ids.insert(reply.json()["id"].as_i64().unwrap());
            }
            409 => assert_eq!(reply.header("retry-after"), Some("1")),
            other => panic!("201 or 409, not {other}"),
        }
    }
    assert_eq!(ids.len(), 1, "one book, whoever answered");
    assert_eq!(app.total().await, 1);
    let in_progress = replies.into_iter().find(|r| r.status == 409);
    if let Some(reply) = in_progress {
        reply.problem(409, "Request with this idempotency key is in progress");
    }
}

pub async fn idempotency_keys_expire(make: &impl MakeHarness) {
    let app = start(make, |c| {
        c.with_idempotency_ttl(std::time::Duration::from_secs(3600))
    })
    .await;
    if keys_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let first = keyed(&app, "/api/books", "daily", valid(author, "B"))
        .await
        .expect(201);
    app.clock.set(june() + chrono::TimeDelta::minutes(59));
    let replay = keyed(&app, "/api/books", "daily", valid(author, "B"))
        .await
        .expect(201);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    app.clock.set(june() + chrono::TimeDelta::minutes(61));
    let fresh = keyed(&app, "/api/books", "daily", valid(author, "B"))
        .await
        .expect(201);
    assert_eq!(
        fresh.header("idempotent-replayed"),
        None,
        "an expired key is new"
    );
    assert_ne!(fresh.json()["id"], first.json()["id"]);
    let replay = keyed(&app, "/api/books", "daily", valid(author, "B"))
        .await
        .expect(201);
    assert_eq!(replay.body, fresh.body);
}

/// Without the store's idempotent creates tier, a create with a key gets its usual 4xx
/// when it has one, else 501, and creates nothing: what every key case checks instead.
/// Whether that is so.
async fn keys_unserved(app: &App<impl Harness>) -> bool {
    if app.harness.tiers().idempotent_creates {
        return false;
    }
    let author = app.author("A").await;
    keyed(app, "/api/books", "k", valid(author, "B"))
        .await
        .problem(501, KEYS_UNSERVED);
    keyed(app, "/api/books", "k", form(&[("title", "")]))
        .await
        .invalid();
    keyed(app, "/api/books", "", valid(author, "B"))
        .await
        .expect(400);
    assert_eq!(app.total().await, 0, "nothing created");
    true
}
