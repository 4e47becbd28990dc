//! `If-Match` on PUT and DELETE (412, 428), each bullet of the contract's section on
//! conditional writes; without the store's conditional writes tier, the documented 501.

use super::*;

/// The 501 of a write with `If-Match` over a store without conditional writes.
const IF_MATCH_UNSERVED: &str = "This server cannot honour If-Match: its store has no atomic \
    conditional writes. Send the write without If-Match.";

/// Without the store's conditional writes tier, a `PUT` or `DELETE` with `If-Match` gets
/// 501 (404 for a missing book) and changes nothing: what every `If-Match` case checks
/// instead. Whether that is so.
async fn if_match_unserved(app: &App<impl Harness>) -> bool {
    if app.harness.tiers().conditional_writes {
        return false;
    }
    let author = app.author("A").await;
    let id = app.book(author, "Kept").await;
    let path = format!("/api/books/{id}");
    let tag = etag(&app.get(&path).await.expect(200));
    for method in ["PUT", "DELETE"] {
        let headers = [("if-match", tag.as_str())];
        let reply = write_with(app, method, &path, &headers, author, "Changed").await;
        reply.problem(501, IF_MATCH_UNSERVED);
        let missing = write_with(app, method, "/api/books/999", &headers, author, "X").await;
        missing.problem(404, "Book not found");
    }
    assert_eq!(
        app.get(&path).await.json()["title"],
        "Kept",
        "nothing changed"
    );
    true
}

fn etag(reply: &Reply) -> String {
    reply.header("etag").expect("an ETag").to_owned()
}

/// A valid book form sent with `method` to `path` and these headers.
async fn write_with(
    app: &App<impl Harness>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    author: i64,
    title: &str,
) -> Reply {
    let mut all = vec![("content-type", FORM)];
    all.extend_from_slice(headers);
    app.send(method, path, &all, valid(author, title)).await
}

pub async fn if_match_guards_updates_and_deletes(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if if_match_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let id = app.book(author, "First").await;
    let path = format!("/api/books/{id}");
    let first = etag(&app.get(&path).await.expect(200));

    let put = write_with(
        &app,
        "PUT",
        &path,
        &[("if-match", &first)],
        author,
        "Second",
    )
    .await
    .expect(200);
    let second = etag(&put);
    assert_ne!(second, first);
    assert_eq!(
        etag(&app.get(&path).await.expect(200)),
        second,
        "the PUT's answer carries the new ETag, as a GET then does"
    );

    // The old tag no longer matches: 412, the current tag, nothing changed.
    let stale = write_with(&app, "PUT", &path, &[("if-match", &first)], author, "Lost").await;
    assert_eq!(stale.header("etag"), Some(second.as_str()));
    stale.problem(412, "Precondition failed");
    assert_eq!(app.get(&path).await.json()["title"], "Second");

    // A weak tag never matches (strong comparison); `*` and a list do.
    let weak = format!("W/{second}");
    let reply = write_with(&app, "PUT", &path, &[("if-match", &weak)], author, "Weak").await;
    reply.problem(412, "Precondition failed");
    let listed = format!("\"nope\", {second}");
    let listed = write_with(&app, "PUT", &path, &[("if-match", &listed)], author, "3").await;
    let third = etag(&listed.expect(200));
    let any = write_with(&app, "PUT", &path, &[("if-match", "*")], author, "Fourth").await;
    let fourth = etag(&any.expect(200));
    assert_ne!(third, fourth);

    // The action route's update honours it too.
    let action = format!("/api/books/update/{id}");
    let reply = write_with(&app, "PUT", &action, &[("if-match", &third)], author, "X").await;
    reply.problem(412, "Precondition failed");
    write_with(
        &app,
        "PUT",
        &action,
        &[("if-match", &fourth)],
        author,
        "Fifth",
    )
    .await
    .expect(200);
    let fifth = etag(&app.get(&path).await);

    // DELETE: a stale tag keeps the book; the current one deletes it.
    let delete = |tag: String| {
        let path = path.clone();
        let app = &app;
        async move {
            app.send("DELETE", &path, &[("if-match", &tag)], Bytes::new())
                .await
        }
    };
    let refused = delete(fourth).await;
    assert_eq!(refused.header("etag"), Some(fifth.as_str()));
    refused.problem(412, "Precondition failed");
    app.get(&path).await.expect(200);
    delete(fifth).await.expect(200);
    app.get(&path).await.expect(404);
    // On a book that is gone, `*` matches nothing: 404, as without If-Match.
    delete("*".to_owned()).await.problem(404, "Book not found");
}

pub async fn if_match_compares_the_representation_the_request_would_get(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if if_match_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let id = app.book(author, "Tagged").await;
    let path = format!("/api/books/{id}");
    let json = etag(&app.get(&path).await);
    let xml = etag(&app.accept(&path, "application/xml").await);
    let with_author = etag(&app.get(&format!("{path}?include=author")).await);

    // The JSON tag does not match a request that would get XML, nor one with include.
    let headers = [("accept", "application/xml"), ("if-match", json.as_str())];
    let reply = write_with(&app, "PUT", &path, &headers, author, "X").await;
    assert_eq!(reply.status, 412);
    assert_eq!(reply.header("etag"), Some(xml.as_str()), "the XML tag");
    let include = format!("{path}?include=author");
    let reply = write_with(&app, "PUT", &include, &[("if-match", &json)], author, "X").await;
    assert_eq!(reply.header("etag"), Some(with_author.as_str()));
    reply.problem(412, "Precondition failed");

    // Each matches its own.
    let headers = [("accept", "application/xml"), ("if-match", xml.as_str())];
    write_with(&app, "PUT", &path, &headers, author, "Xml")
        .await
        .expect(200);
    let include = format!("{path}?include=author");
    let now = etag(&app.get(&include).await);
    write_with(
        &app,
        "PUT",
        &include,
        &[("if-match", &now)],
        author,
        "Included",
    )
    .await
    .expect(200);

    // The author removed meanwhile changes the representation with include, not the
    // one without (which names no author).
    let now = etag(&app.get(&include).await);
    let plain = etag(&app.get(&path).await);
    app.harness.remove_author(author).await;
    let reply = app
        .send("DELETE", &include, &[("if-match", &now)], Bytes::new())
        .await;
    reply.problem(412, "Precondition failed");
    app.send("DELETE", &path, &[("if-match", &plain)], Bytes::new())
        .await
        .expect(200);
}

/// (Without the store's conditional writes tier, the usual checks come first all the
/// same, and the 501 comes where the 412 would.)
pub async fn if_match_comes_after_the_usual_checks(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_write_token(Some("t")).with_body_limit(64)).await;
    let author = app.author("A").await;
    let bearer = [("authorization", "Bearer t")];
    let created = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", FORM), bearer[0]],
            valid(author, "B"),
        )
        .await
        .expect(201);
    let path = format!("/api/books/{}", created.json()["id"]);
    let stale = [("if-match", "\"stale\"")];
    let auth_and_stale = [bearer[0], stale[0]];
    let send = |headers: Vec<(&'static str, &'static str)>, body: String| {
        let (app, path) = (&app, path.clone());
        async move { app.send("PUT", &path, &headers, body).await }
    };
    let form = valid(author, "X");
    send(vec![("content-type", FORM), stale[0]], form.clone())
        .await
        .expect(401);
    send(
        vec![
            ("content-type", "text/csv"),
            auth_and_stale[0],
            auth_and_stale[1],
        ],
        form.clone(),
    )
    .await
    .expect(415);
    send(
        vec![("content-type", JSON), auth_and_stale[0], auth_and_stale[1]],
        "{".into(),
    )
    .await
    .expect(400);
    send(
        vec![("content-type", FORM), auth_and_stale[0], auth_and_stale[1]],
        "x".repeat(100),
    )
    .await
    .expect(413);
    send(
        vec![("content-type", FORM), auth_and_stale[0], auth_and_stale[1]],
        "title=".into(),
    )
    .await
    .expect(422);
    let missing = app
        .send(
            "PUT",
            "/api/books/999",
            &[("content-type", FORM), bearer[0], stale[0]],
            form,
        )
        .await;
    missing.problem(404, "Book not found");
    let delete = app
        .send(
            "DELETE",
            "/api/books/999",
            &[bearer[0], stale[0]],
            Bytes::new(),
        )
        .await;
    delete.problem(404, "Book not found");
    let last = send(
        vec![("content-type", FORM), auth_and_stale[0], auth_and_stale[1]],
        valid(author, "Y"),
    )
    .await;
    match app.harness.tiers().conditional_writes {
        true => drop(last.problem(412, "Precondition failed")),
        false => drop(last.problem(501, IF_MATCH_UNSERVED)),
    }
}

pub async fn if_match_lets_one_of_concurrent_writes_win(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if if_match_unserved(&app).await {
        return;
    }
    let author = app.author("A").await;
    let id = app.book(author, "Contested").await;
    let path = format!("/api/books/{id}");
    let tag = etag(&app.get(&path).await);
    let writes = (0..16).map(|n| {
        let (app, path, tag) = (&app, &path, &tag);
        async move {
            let title = format!("Writer {n}");
            write_with(app, "PUT", path, &[("if-match", tag)], author, &title).await
        }
    });
    let replies = futures_util::future::join_all(writes).await;
    let won: Vec<_> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one wins: {:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(replies.iter().all(|r| r.status == 200 || r.status == 412));
    assert_eq!(
        app.get(&path).await.json()["title"],
        won[0].json()["title"],
        "the winner's write stands"
    );
}

pub async fn if_match_can_be_required(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_require_if_match(true)).await;
    let author = app.author("A").await;
    let id = app.book(author, "Guarded").await;
    let path = format!("/api/books/{id}");
    app.valid_write("PUT", &path, author, "Unconditional")
        .await
        .problem(428, "Precondition required");
    app.send("DELETE", &path, &[], Bytes::new())
        .await
        .problem(428, "Precondition required");
    app.valid_write("PUT", "/api/books/999", author, "Missing")
        .await
        .problem(404, "Book not found");
    let tag = etag(&app.get(&path).await);
    let conditional = write_with(
        &app,
        "PUT",
        &path,
        &[("if-match", &tag)],
        author,
        "Conditional",
    )
    .await;
    match app.harness.tiers().conditional_writes {
        true => drop(conditional.expect(200)),
        false => drop(conditional.problem(501, IF_MATCH_UNSERVED)),
    }
    // If-None-Match is no write precondition: ignored.
    let reply = write_with(&app, "PUT", &path, &[("if-none-match", "*")], author, "Z").await;
    reply.problem(428, "Precondition required");
}

pub async fn writes_ignore_if_none_match(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("A").await;
    let id = app.book(author, "Plain").await;
    let path = format!("/api/books/{id}");
    let tag = etag(&app.get(&path).await);
    write_with(
        &app,
        "PUT",
        &path,
        &[("if-none-match", &tag)],
        author,
        "Still",
    )
    .await
    .expect(200);
    app.send("DELETE", &path, &[("if-none-match", "*")], Bytes::new())
        .await
        .expect(200);
}
