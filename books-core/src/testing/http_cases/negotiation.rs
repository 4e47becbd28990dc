//! `Accept`, JSON and XML, and XML mirroring JSON.

use super::*;

pub async fn json_is_the_default_format(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for accept in [
        "*/*",
        "application/*",
        "application/json",
        "application/xml, application/json",
        "application/json;q=0.8, application/xml;q=0.8",
        "text/html;q=0.9, */*;q=0.1",
        "",
    ] {
        let reply = app.accept("/api/ping", accept).await.expect(200);
        assert_eq!(reply.header("content-type"), Some(JSON), "Accept: {accept}");
        assert_eq!(reply.json(), json!({"status": "ok"}));
    }
}

pub async fn accept_selects_xml(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for accept in [
        "application/xml",
        "text/xml",
        "text/*",
        "application/json;q=0.5, application/xml",
        "application/json;q=0, */*",
        "text/*;q=0.3, application/json;q=0.2",
    ] {
        let reply = app.accept("/api/ping", accept).await.expect(200);
        assert_eq!(reply.header("content-type"), Some(XML), "Accept: {accept}");
        assert_eq!(reply.header("vary"), Some("Accept"));
        let xml = reply.xml();
        assert_eq!(xml.name, "ping");
        xml.assert_mirrors(&json!({"status": "ok"}), "message");
    }
}

pub async fn accept_q_zero_and_specificity(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    for accept in [
        "text/html",
        "image/*",
        "*/*;q=0",
        "application/json;q=0, application/xml;q=0, text/xml;q=0",
        "text/*, text/xml;q=0",
        "application/json;q=0, text/plain",
    ] {
        let body = app
            .accept("/api/books", accept)
            .await
            .problem(406, "Not acceptable");
        assert_eq!(body["title"], "Not Acceptable", "Accept: {accept}");
    }
}

pub async fn errors_follow_the_negotiated_format(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let reply = app
        .accept("/api/books/999", "application/xml")
        .await
        .expect(404);
    assert_eq!(reply.header("content-type"), Some(PROBLEM_XML));
    assert_eq!(reply.header("vary"), Some("Accept"));
    let xml = reply.xml();
    assert_eq!(xml.name, "problem");
    assert_eq!(xml.child("detail").unwrap().text, "Book not found");
    assert_eq!(xml.child("status").unwrap().text, "404");
    let reply = app
        .send("POST", "/api/ping", &[("accept", "text/xml")], Bytes::new())
        .await
        .expect(405);
    assert_eq!(reply.header("content-type"), Some(PROBLEM_XML));
    assert_eq!(
        reply.xml().child("detail").unwrap().text,
        "Method not allowed"
    );
}

pub async fn xml_book_mirrors_json(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let author = app.author("Smith & <Sons> \"Ltd\"").await;
    let id = app.book(author, "Dune & <Co> 'quoted' ✓").await;
    let nameless = app.harness.add_author(None).await;
    let other = app.book(nameless, "Nameless").await;
    for id in [id, other] {
        let path = format!("/api/books/{id}?include=author");
        let json = app.get(&path).await.expect(200).json();
        let reply = app.accept(&path, "application/xml").await.expect(200);
        assert_eq!(reply.header("content-type"), Some(XML));
        let xml = reply.xml();
        assert_eq!(xml.name, "book");
        xml.assert_mirrors(&json, "book");
    }
}

pub async fn xml_page_mirrors_json(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_page_size(NonZeroU32::new(2).unwrap())).await;
    app.seed(3).await;
    let path = "/api/books?page=2&include=author";
    let json = app.get(path).await.expect(200).json();
    let xml = app.accept(path, "text/xml").await.expect(200).xml();
    assert_eq!(xml.name, "books");
    xml.assert_mirrors(&json, "book");
    assert_eq!(xml.child("data").unwrap().children.len(), 1);
    let empty = app
        .accept("/api/books?page=9", "application/xml")
        .await
        .expect(200)
        .xml();
    assert!(empty.child("data").unwrap().children.is_empty());
}

pub async fn xml_error_mirrors_json(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let bad = form(&[("title", "<bad & \u{1}>"), ("year", "1999")]);
    let json = app
        .send("POST", "/api/books", &[("content-type", FORM)], bad.clone())
        .await
        .invalid();
    let reply = app
        .send(
            "POST",
            "/api/books",
            &[("content-type", FORM), ("accept", "application/xml")],
            bad,
        )
        .await
        .expect(422);
    let xml = reply.xml_problem();
    xml.child("errors")
        .unwrap()
        .assert_mirrors(&json, "message");
    let not_found = app.accept("/api/books/77", "application/xml").await;
    let json_404 = app
        .get("/api/books/77")
        .await
        .problem(404, "Book not found");
    not_found
        .expect(404)
        .xml_problem()
        .assert_mirrors(&json_404, "message");
}
