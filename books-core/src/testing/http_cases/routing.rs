//! Ping, routes in both schemes, prefixes, HEAD, OPTIONS and 405.

use super::*;

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
        json!({"status": "ok", "time": "2026-06-15T12:00:00Z", "version": crate::api::VERSION})
    );
    // The time follows the clock, and each answer carries its own request id.
    app.clock.set(june() + chrono::TimeDelta::seconds(1));
    let again = app.get("/api/ping").await.expect(200);
    assert_eq!(again.json()["time"], "2026-06-15T12:00:01Z");
    // `Date` is the body's second (filled with it once, not read from the clock again).
    assert_eq!(again.header("date"), Some("Mon, 15 Jun 2026 12:00:01 GMT"));
    let xml = app.accept("/api/ping", "application/xml").await.expect(200);
    assert!(
        xml.xml()
            .children
            .iter()
            .any(|c| c.text == "2026-06-15T12:00:01Z")
    );
    let ids: std::collections::HashSet<_> = [&reply, &again, &xml]
        .iter()
        .map(|r| r.header("x-request-id").expect("an id").to_owned())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(again.headers.get_all("x-request-id").iter().count(), 1);
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
        assert_eq!(head.header("vary"), get.header("vary"), "{path}");
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
