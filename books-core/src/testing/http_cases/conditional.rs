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
            assert_eq!(reply.header("vary"), full.header("vary"), "as the 200's");
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

pub async fn compressed_answers_have_their_own_tags(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    app.seed(20).await;
    let page = "/api/books?include=author";
    let plain = app.get(page).await.expect(200);
    assert!(plain.body.len() >= 1024, "a page worth compressing");
    assert_eq!(plain.header("content-encoding"), None, "no Accept-Encoding");
    assert_eq!(plain.header("vary"), Some("Accept, Accept-Encoding"));
    let identity = etag(&plain);
    let mut tags = std::collections::HashSet::from([identity.clone()]);
    for (accept, coding) in [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip, deflate, br, zstd", "br"),
        ("br;q=0.5, gzip", "gzip"),
    ] {
        for method in ["GET", "HEAD"] {
            let reply = app
                .send(method, page, &[("accept-encoding", accept)], Bytes::new())
                .await
                .expect(200);
            assert_eq!(reply.header("content-encoding"), Some(coding), "{accept}");
            assert_eq!(reply.header("vary"), Some("Accept, Accept-Encoding"));
            let tag = etag(&reply);
            assert_eq!(
                tag,
                format!("{}-{coding}\"", identity.trim_end_matches('"'))
            );
            if method == "HEAD" {
                assert!(reply.body.is_empty());
                continue;
            }
            assert_eq!(
                crate::testing::decoded(coding, &reply.body),
                plain.body,
                "{accept}"
            );
            assert!(reply.body.len() < plain.body.len() / 2, "{accept}");
            assert_eq!(
                reply.header("content-length"),
                Some(reply.body.len().to_string().as_str())
            );
            tags.insert(tag.clone());
            // Its own tag gets a 304 for the same encoding; the identity's does too (the
            // client holds those bytes); another encoding's does not.
            let headers = [("accept-encoding", accept), ("if-none-match", tag.as_str())];
            let not_modified = app.send("GET", page, &headers, Bytes::new()).await;
            let not_modified = not_modified.expect(304);
            assert_eq!(not_modified.header("etag"), Some(tag.as_str()));
            assert_eq!(not_modified.header("vary"), Some("Accept, Accept-Encoding"));
            assert_eq!(not_modified.header("content-encoding"), None);
            assert!(not_modified.body.is_empty());
            let other = [
                ("accept-encoding", "identity"),
                ("if-none-match", tag.as_str()),
            ];
            let full = app
                .send("GET", page, &other, Bytes::new())
                .await
                .expect(200);
            assert_eq!(full.body, plain.body);
        }
    }
    assert_eq!(tags.len(), 4, "a strong tag per encoding: {tags:?}");
    // Small answers and those nobody may compress go as they are.
    let ping = app
        .send(
            "GET",
            "/api/ping",
            &[("accept-encoding", "gzip")],
            Bytes::new(),
        )
        .await
        .expect(200);
    assert_eq!(ping.header("content-encoding"), None);
    for refused in ["identity", "gzip;q=0, br;q=0, zstd;q=0", "deflate"] {
        let reply = app
            .send("GET", page, &[("accept-encoding", refused)], Bytes::new())
            .await
            .expect(200);
        assert_eq!(reply.header("content-encoding"), None, "{refused}");
        assert_eq!(reply.body, plain.body);
    }

    // A write's If-Match may name any encoding's tag of the book as it is: each names
    // that state; an encoding the API does not make names nothing.
    let author = app.author("A").await;
    let id = app.book(author, "Tagged").await;
    let book = format!("/api/books/{id}");
    let tag = etag(&app.get(&book).await.expect(200));
    let unknown = format!("{}-deflate\"", tag.trim_end_matches('"'));
    let gzip = format!("{}-gzip\"", tag.trim_end_matches('"'));
    // (A store without conditional writes answers 501 to any If-Match.)
    let served = |status| match app.harness.tiers().conditional_writes {
        true => status,
        false => 501,
    };
    for (if_match, status) in [
        (unknown.as_str(), served(412)),
        (gzip.as_str(), served(200)),
    ] {
        let headers = [("content-type", FORM), ("if-match", if_match)];
        let reply = app
            .send("PUT", &book, &headers, valid(author, "Retitled"))
            .await;
        assert_eq!(reply.status, status, "If-Match: {if_match}");
    }

    let off = start(make, |c| c.with_compression(false)).await;
    off.seed(20).await;
    let reply = off
        .send("GET", page, &[("accept-encoding", "gzip")], Bytes::new())
        .await
        .expect(200);
    assert_eq!(reply.header("content-encoding"), None);
    assert_eq!(reply.header("vary"), Some("Accept"));
}

/// `Cache-Control` on every answer: books and pages `no-cache` (kept by a cache, but
/// revalidated with their `ETag` before each use), or the configured `max-age`; ping,
/// deletes, `OPTIONS` and every problem `no-store`.
pub async fn cache_control_on_every_answer(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "Kept").await;
    let book = format!("/api/books/{id}");
    let cache_control = |reply: &Reply| reply.header("cache-control").map(str::to_owned);
    let revalidate = Some("no-cache".to_owned());
    let tag = etag(&app.get(&book).await);
    for path in [book.as_str(), "/api/books", "/api/books?include=author"] {
        assert_eq!(
            cache_control(&app.get(path).await.expect(200)),
            revalidate,
            "{path}"
        );
    }
    let not_modified = app
        .send("GET", &book, &[("if-none-match", &tag)], Bytes::new())
        .await
        .expect(304);
    assert_eq!(cache_control(&not_modified), revalidate, "a 304 as its 200");
    let written = app.valid_write("PUT", &book, author, "Again").await;
    assert_eq!(
        cache_control(&written.expect(200)),
        revalidate,
        "a PUT's book"
    );
    let store = Some("no-store".to_owned());
    assert_eq!(
        cache_control(&app.get("/api/ping").await.expect(200)),
        store
    );
    let options = app.send("OPTIONS", &book, &[], Bytes::new()).await;
    assert_eq!(cache_control(&options.expect(204)), store);
    assert_eq!(
        cache_control(&app.get("/api/books/999").await.expect(404)),
        store
    );
    let deleted = app.send("DELETE", &book, &[], Bytes::new()).await;
    assert_eq!(cache_control(&deleted.expect(200)), store);

    let bounded = start(make, |c| {
        c.with_cache_control(crate::config::CacheControl::MaxAge(60))
    })
    .await;
    let id = bounded.book(bounded.author("B").await, "Fresh").await;
    let reply = bounded.get(&format!("/api/books/{id}")).await.expect(200);
    assert_eq!(cache_control(&reply).as_deref(), Some("max-age=60"));
    let page = bounded.get("/api/books").await.expect(200);
    assert_eq!(cache_control(&page).as_deref(), Some("max-age=60"));
}

pub async fn date_on_every_answer(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "Dated").await;
    let book = format!("/api/books/{id}");
    let tag = etag(&app.get(&book).await);
    // One `Date`, the configured clock's: the cache's and the ping's kept answers are
    // copied with a fresh one each time, whatever the server adds.
    for (day, date) in [
        (0, "Mon, 15 Jun 2026 12:00:00 GMT"),
        (1, "Tue, 16 Jun 2026 12:00:01 GMT"),
    ] {
        app.clock
            .set(june() + chrono::TimeDelta::days(day) + chrono::TimeDelta::seconds(day));
        let kept = [
            app.get(&book).await.expect(200),
            app.get("/api/books?include=author").await.expect(200),
            app.get("/api/books?include=author").await.expect(200),
            app.get("/api/ping").await.expect(200),
            app.send("GET", &book, &[("if-none-match", &tag)], Bytes::new())
                .await
                .expect(304),
            app.get("/api/books/999").await.expect(404),
            app.send("HEAD", &book, &[], Bytes::new()).await.expect(200),
            app.send("OPTIONS", &book, &[], Bytes::new())
                .await
                .expect(204),
            app.send(
                "GET",
                "/api/ping",
                &[("accept", "application/xml")],
                Bytes::new(),
            )
            .await
            .expect(200),
        ];
        for reply in kept {
            let dates: Vec<_> = reply.headers.get_all("date").iter().collect();
            assert_eq!(dates, [date], "{} {:?}", reply.status, reply.headers);
        }
    }
    let written = app.valid_write("PUT", &book, author, "Again").await;
    assert_eq!(
        written.expect(200).header("date"),
        Some("Tue, 16 Jun 2026 12:00:01 GMT")
    );
}
