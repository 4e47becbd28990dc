//! Problems the client can quote (request ids) and the write token.

use super::*;

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
