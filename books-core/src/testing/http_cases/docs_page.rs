//! The reference page (`GET {prefix}/docs`, feature `docs-page`): off unless asked, its
//! policy and caching, its assets under relative URLs, and the rules every path follows.
//! (A browser opens it in the server's `tests/docs_page.rs`.)

use super::*;

pub async fn docs_page_is_served_like_every_route(make: &impl MakeHarness) {
    #[cfg(not(feature = "docs-page"))]
    let _ = make;
    #[cfg(feature = "docs-page")]
    served(make).await;
}

#[cfg(feature = "docs-page")]
async fn served(make: &impl MakeHarness) {
    let off = start(make, |c| c).await;
    off.get("/api/docs").await.problem(404, "Not found");
    let no_document = start(make, |c| c.with_docs(true).with_openapi(false)).await;
    no_document.get("/api/docs").await.problem(404, "Not found");

    let app = start(make, |c| c.with_docs(true)).await;
    let mut scripts = Vec::new();
    for page_path in ["/api/docs", "/api/docs/"] {
        // HTML whatever the `Accept`: a browser asks for it with `text/html`.
        let page = app.accept(page_path, "text/html").await.expect(200);
        assert_eq!(
            page.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        let policy = page.header("content-security-policy").expect("a CSP");
        assert!(policy.starts_with("default-src 'self'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(page.header("cache-control"), Some("no-cache"));
        assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
        let tag = page.header("etag").expect("an ETag").to_owned();
        app.send("GET", page_path, &[("if-none-match", &tag)], Bytes::new())
            .await
            .expect(304);
        let html = std::str::from_utf8(&page.body).expect("UTF-8").to_owned();
        assert!(!html.contains("://"), "every URL is relative: {html}");
        let assets: Vec<String> = html
            .split('"')
            .filter(|part| part.contains("docs/assets/"))
            .map(|url| resolve(page_path, url))
            .collect();
        assert_eq!(assets.len(), 5, "{html}");
        for url in &assets {
            let asset = app.get(url).await.expect(200);
            assert_eq!(
                asset.header("cache-control"),
                Some("public, max-age=31536000, immutable"),
                "{url}"
            );
            assert_eq!(asset.header("x-content-type-options"), Some("nosniff"));
            let kind = asset.header("content-type").expect("a type");
            let expected = match url.rsplit('.').next() {
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                _ => "image/png",
            };
            assert_eq!(kind, expected, "{url}");
            let tag = asset.header("etag").expect("an ETag");
            app.send("GET", url, &[("if-none-match", tag)], Bytes::new())
                .await
                .expect(304);
            if url.ends_with("docs-page.js") {
                scripts.push((url.clone(), asset));
            }
        }
        // The page's link to the document it is built from (docs-page.js asks for the
        // same, relative to the same root).
        let document = html
            .split('"')
            .find(|part| part.ends_with("openapi.json"))
            .map(|url| resolve(page_path, url));
        assert_eq!(document.as_deref(), Some("/api/openapi.json"), "{html}");
    }
    // Both pages name the same files.
    let (url, identity) = &scripts[0];
    assert_eq!(&scripts[1].0, url);
    compressed_like_every_answer(&app, url, identity).await;

    // HEAD, 405 with Allow, OPTIONS: as on every path.
    for path in ["/api/docs", url.as_str()] {
        let get = app.get(path).await.expect(200);
        let head = app.send("HEAD", path, &[], Bytes::new()).await.expect(200);
        assert!(head.body.is_empty());
        assert_eq!(head.header("content-length"), get.header("content-length"));
        assert_eq!(head.header("etag"), get.header("etag"));
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            let refused = app.send(method, path, &[], Bytes::new()).await;
            assert_eq!(
                refused.header("allow"),
                Some("GET, HEAD, OPTIONS"),
                "{path}"
            );
            refused.problem(405, "Method not allowed");
        }
        let options = app
            .send("OPTIONS", path, &[], Bytes::new())
            .await
            .expect(204);
        assert_eq!(options.header("allow"), Some("GET, HEAD, OPTIONS"));
    }

    // A known file under another version (a page of another release): served, not kept.
    let (prefix, file) = url.rsplit_once('/').expect("a file");
    let (assets, _) = prefix.rsplit_once('/').expect("a version");
    let stale = app.get(&format!("{assets}/0123/{file}")).await.expect(200);
    assert_eq!(stale.header("cache-control"), Some("no-cache"));
    assert_eq!(stale.body, identity.body);
    for missing in [
        format!("{prefix}/index.html"),
        format!("{prefix}/../swagger-ui.css"),
        format!("{url}/x"),
        "/api/docs/assets".to_owned(),
        "/api/docs/nope".to_owned(),
    ] {
        app.get(&missing).await.problem(404, "Not found");
    }

    let moved = start(make, |c| c.with_docs(true).with_prefix("/v1")).await;
    moved.get("/v1/docs").await.expect(200);
    // Outside the prefix: the host's 404 where the API is mounted in one.
    assert_eq!(moved.get("/api/docs").await.status, 404);
}

/// The asset at `url` (`identity` as sent uncompressed) in each coding, with its own tag.
#[cfg(feature = "docs-page")]
async fn compressed_like_every_answer<H: Harness>(app: &App<H>, url: &str, identity: &Reply) {
    use std::io::Read;

    assert!(identity.body.len() >= 1024, "large enough to compress");
    let tag = identity.header("etag").expect("an ETag");
    for coding in ["gzip", "br", "zstd"] {
        let reply = app
            .send("GET", url, &[("accept-encoding", coding)], Bytes::new())
            .await
            .expect(200);
        assert_eq!(reply.header("content-encoding"), Some(coding));
        assert_eq!(reply.header("vary"), Some("Accept-Encoding"));
        let variant = reply.header("etag").expect("a tag");
        assert_eq!(variant, format!("{}-{coding}\"", &tag[..tag.len() - 1]));
        let mut decoded = Vec::new();
        match coding {
            "gzip" => {
                flate2::read::GzDecoder::new(&reply.body[..])
                    .read_to_end(&mut decoded)
                    .expect("gzip");
            }
            "br" => {
                brotli::BrotliDecompress(&mut &reply.body[..], &mut decoded).expect("br");
            }
            _ => {
                let mut source = &reply.body[..];
                ruzstd::decoding::StreamingDecoder::new(&mut source)
                    .expect("zstd")
                    .read_to_end(&mut decoded)
                    .expect("zstd");
            }
        }
        assert_eq!(decoded, identity.body, "{coding}");
        let headers = [("accept-encoding", coding), ("if-none-match", variant)];
        app.send("GET", url, &headers, Bytes::new())
            .await
            .expect(304);
    }
}

/// `url` (relative, as the page writes it) resolved against the page at `page`.
#[cfg(feature = "docs-page")]
fn resolve(page: &str, url: &str) -> String {
    let directory = &page[..=page.rfind('/').expect("an absolute path")];
    let mut segments: Vec<&str> = directory.split('/').filter(|s| !s.is_empty()).collect();
    for part in url.split('/') {
        match part {
            "." => {}
            ".." => {
                segments.pop();
            }
            part => segments.push(part),
        }
    }
    format!("/{}", segments.join("/"))
}
