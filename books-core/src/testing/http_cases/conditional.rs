//! Conditional reads: strong `ETag`s on books and pages, `If-None-Match` and 304.

use super::*;

fn etag(reply: &Reply) -> String {
    reply.header("etag").expect("an ETag").to_owned()
}

/// A GET of `path` with `If-None-Match: tags`.
async fn get_unless(app: &App<impl Harness>, path: &str, tags: &str) -> Reply {
    app.send("GET", path, &[("if-none-match", tags)], Bytes::new())
        .await
}

pub async fn reads_carry_strong_etags(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "Tagged").await;
    let book = format!("/api/books/{id}");
    let tag = etag(&app.get(&book).await.expect(200));
    assert!(
        tag.len() > 2 && tag.starts_with('"') && tag.ends_with('"'),
        "a strong tag: {tag}"
    );
    assert_eq!(etag(&app.get(&book).await.expect(200)), tag, "same bytes");
    let head = app.send("HEAD", &book, &[], Bytes::new()).await.expect(200);
    assert_eq!(etag(&head), tag, "HEAD as GET");
    let list = etag(&app.get("/api/books").await.expect(200));
    let tags = std::collections::HashSet::from([
        tag.clone(),
        etag(&app.accept(&book, "application/xml").await.expect(200)),
        etag(&app.get(&format!("{book}?include=author")).await.expect(200)),
        list.clone(),
        etag(&app.get("/api/books?include=author").await.expect(200)),
    ]);
    assert_eq!(tags.len(), 5, "one tag per representation: {tags:?}");

    app.valid_write("PUT", &book, author, "Retitled")
        .await
        .expect(200);
    assert_ne!(
        etag(&app.get(&book).await.expect(200)),
        tag,
        "after an update"
    );
    app.book(author, "Another").await;
    assert_ne!(
        etag(&app.get("/api/books").await.expect(200)),
        list,
        "after a create"
    );
    for path in ["/api/ping", "/api/books/999"] {
        assert_eq!(app.get(path).await.header("etag"), None, "{path}");
    }
}

pub async fn if_none_match_answers_304(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "Cached").await;
    let book = format!("/api/books/{id}");
    let full = app.get(&book).await.expect(200);
    let tag = etag(&full);
    for header in [
        tag.clone(),
        format!("W/{tag}"),
        format!("\"other\", {tag}"),
        format!("W/\"a,b\" ,{tag}"),
        "*".to_owned(),
    ] {
        for method in ["GET", "HEAD"] {
            let id = format!("{method}-{}", header.len());
            let headers = [("if-none-match", header.as_str()), ("x-request-id", &id)];
            let reply = app
                .send(method, &book, &headers, Bytes::new())
                .await
                .expect(304);
            assert!(reply.body.is_empty(), "{method} {header}");
            assert_eq!(reply.header("etag"), Some(tag.as_str()));
            assert_eq!(reply.header("vary"), Some("Accept"));
            let ids: Vec<_> = reply.headers.get_all("x-request-id").iter().collect();
            assert_eq!(ids, [id.as_str()], "this request's id, once");
            assert_eq!(reply.header("content-type"), None);
        }
    }
    // A cached 200 carries each request's own id too.
    for id in ["first", "second"] {
        let reply = app
            .send("GET", &book, &[("x-request-id", id)], Bytes::new())
            .await
            .expect(200);
        let ids: Vec<_> = reply.headers.get_all("x-request-id").iter().collect();
        assert_eq!(ids, [id], "this request's id, once");
        assert_eq!(reply.body, full.body);
    }
    let inner = tag.trim_matches('"').to_owned();
    for header in ["\"other\"", "W/\"other\"", "garbage", &inner, "*, \"x\""] {
        let reply = get_unless(&app, &book, header).await.expect(200);
        assert_eq!(reply.body, full.body, "If-None-Match: {header}");
    }
    let xml = etag(&app.accept(&book, "application/xml").await.expect(200));
    let json = get_unless(&app, &book, &xml).await;
    assert_eq!(json.status, 200, "the XML tag is not the JSON one");

    let list = app.get("/api/books?include=author").await.expect(200);
    let list_tag = etag(&list);
    get_unless(&app, "/api/books?include=author", &list_tag)
        .await
        .expect(304);

    app.valid_write("PUT", &book, author, "Changed")
        .await
        .expect(200);
    let after = get_unless(&app, &book, &tag).await.expect(200);
    assert_ne!(etag(&after), tag, "a write invalidates the old tag");
    get_unless(&app, "/api/books?include=author", &list_tag)
        .await
        .expect(200);

    get_unless(&app, "/api/books/999", "*")
        .await
        .problem(404, "Book not found");
    app.send("DELETE", &book, &[("if-none-match", "*")], Bytes::new())
        .await
        .expect(200);
}
