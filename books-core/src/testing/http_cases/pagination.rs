//! Pages, their links and their limits.

use super::*;

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

/// Pages read before a create show it at once (the cache keeps full pages across
/// creates and renders their `meta` and `links` again): new total, new links, new tag,
/// the new book on the page that gains it; an update after them shows too.
pub async fn pages_stay_exact_across_creates(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_page_size(NonZeroU32::new(2).unwrap())).await;
    let ids = app.seed(4).await;
    let author = app.author("Later").await;
    let app = &app;
    let read = |page: u64| async move {
        let reply = app
            .get(&format!("/api/books?page={page}"))
            .await
            .expect(200);
        let tag = reply.header("etag").expect("an ETag").to_owned();
        (reply.json(), tag)
    };
    let data_ids = |body: &Value| -> Vec<i64> {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["id"].as_i64().unwrap())
            .collect()
    };
    // Twice each: the second read is the cached one.
    for _ in 0..2 {
        for page in 1..=3 {
            read(page).await;
        }
    }
    let (_, tag) = read(1).await;
    let created = app.book(author, "Fifth").await;
    let (first, new_tag) = read(1).await;
    assert_eq!(data_ids(&first), ids[0..2]);
    assert_eq!(
        first["meta"],
        json!({"page": 1, "perPage": 2, "total": 5, "totalPages": 3})
    );
    assert_eq!(
        first["links"]["last"],
        json!(format!("{BASE}/api/books?page=3"))
    );
    assert_ne!(new_tag, tag, "new bytes, new tag");
    let stale = app
        .send(
            "GET",
            "/api/books?page=1",
            &[("if-none-match", &tag)],
            Bytes::new(),
        )
        .await;
    assert_eq!(stale.status, 200, "the old tag no longer matches");
    let (second, _) = read(2).await;
    assert_eq!(second["meta"]["total"], 5);
    assert_eq!(
        second["links"]["next"],
        json!(format!("{BASE}/api/books?page=3"))
    );
    let (third, _) = read(3).await;
    assert_eq!(data_ids(&third), [created]);

    app.valid_write("PUT", &format!("/api/books/{}", ids[0]), author, "Retitled")
        .await
        .expect(200);
    let (first, _) = read(1).await;
    assert_eq!(first["data"][0]["title"], "Retitled", "an update");
    app.book(author, "Sixth").await;
    let (first, _) = read(1).await;
    assert_eq!(first["meta"]["total"], 6, "a second create");
    assert_eq!(first["data"][0]["title"], "Retitled");
}
