//! Create, read, update and delete, with `include=author`.

use super::*;

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
