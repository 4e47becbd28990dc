//! The reference page in a real browser: the server binary with its defaults (the page
//! on), headless Chromium driven through chromedriver. The page lists every operation of
//! the OpenAPI document; "try it" lists books with a filter, creates one with an
//! `Idempotency-Key` and updates it with `If-Match`; the browser logs no error and asks
//! nothing of any other origin.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/install-browser`): without them
//! the test shows as ignored, except under `CI=true`, where it runs and fails.
//! `BOOKS_DOCS_SCREENSHOT=docs/reference-page.png` also writes the screenshot the README
//! shows.

mod common;
mod webdriver;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::FutureExt;
use serde_json::{Value, json};

use webdriver::{Driver, Session};

/// A wait for the page (Swagger UI renders, a request comes back).
const WAIT: Duration = Duration::from_secs(30);

/// A base URL on another origin than the page's: the document names it as its server,
/// and "try it" must still go to the origin that served the page (`.invalid` never
/// resolves; the page's policy would refuse it anyway, and the console would say so).
const ELSEWHERE: &str = "http://books.invalid";

#[test]
fn the_server_serves_the_page_unless_told_not_to() {
    let local = SocketAddr::from(([127, 0, 0, 1], 8080));
    let parse = |args: &[&str]| {
        let args = ["books-api"].iter().chain(args);
        books_api::Options::try_parse_from(args).expect("valid flags")
    };
    assert!(parse(&[]).config(local).docs());
    assert!(!parse(&["--docs", "false"]).config(local).docs());
    assert!(!parse(&["--openapi", "false"]).config(local).docs());
    assert!(!books_core::Config::default().docs(), "off in the library");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(books_test_chromium),
    ignore = "needs chromium and chromedriver (.ci/install-browser)"
)]
async fn the_reference_page_lists_every_operation_and_tries_them() {
    let (Some(chromium), Some(chromedriver)) = (
        webdriver::program("chromium"),
        webdriver::program("chromedriver"),
    ) else {
        panic!("chromium and chromedriver are not on the PATH (.ci/install-browser)");
    };
    let started = Instant::now();
    let (_server, addr) =
        common::server(&["--database-url", "memory", "--base-url", ELSEWHERE]).await;
    let driver = Driver::start(&chromedriver).await;
    let profile = Profile::new();
    let session = driver.session(&chromium, &profile.0, (1280, 1700)).await;
    // The session closes its browser whatever happens; the assertion comes after.
    let outcome = std::panic::AssertUnwindSafe(use_the_page(&session, addr))
        .catch_unwind()
        .await;
    session.quit().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    eprintln!(
        "the reference page's browser test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn use_the_page(session: &Session, addr: SocketAddr) {
    let origin = format!("http://{addr}");
    session.open(&format!("{origin}/api/docs")).await;

    // Every operation of the document, listed.
    let document = common::call(addr, "GET", "/api/openapi.json", &[], "").await;
    let expected = operation_ids(&document.json());
    let listed = session
        .until(
            "every operation listed",
            WAIT,
            "const ids = [...document.querySelectorAll('.opblock')].map(e => e.id);
             return ids.length >= arguments[0] ? ids : null;",
            json!([expected.len()]),
        )
        .await;
    let listed: BTreeSet<String> = listed
        .as_array()
        .expect("ids")
        .iter()
        .map(|id| id.as_str().expect("an id").to_owned())
        .collect();
    let expected: BTreeSet<String> = expected
        .iter()
        .map(|id| format!("operations-default-{id}"))
        .collect();
    assert_eq!(listed, expected);

    // The list, filtered by year.
    let list = Operation::open(session, "listBooks").await;
    list.fill("tr[data-param-name=\"filter[year]\"] input", "2011")
        .await;
    let page = list.execute(200).await;
    let books = page.body["data"].as_array().expect("books");
    assert_eq!(page.body["meta"]["total"], 4, "{}", page.body);
    assert!(books.iter().all(|book| book["year"] == 2011), "{books:?}");
    assert!(page.url.starts_with(&format!("{origin}/api/books?")));
    assert!(page.url.contains("filter%5Byear%5D=2011"), "{}", page.url);
    if let Some(path) = std::env::var_os("BOOKS_DOCS_SCREENSHOT") {
        // The operation at the top of the window, its parameters and answer below.
        let scroll = "document.querySelector('#operations-default-listBooks').scrollIntoView();
                      window.scrollBy(0, -16);";
        session.script(scroll, json!([])).await;
        std::fs::write(&path, session.screenshot().await).expect("write the screenshot");
    }

    // A create with an Idempotency-Key, in JSON.
    let create = Operation::open(session, "createBook").await;
    create.content_type("application/json").await;
    let body = r#"{"title": "Written in a browser", "author_id": 3, "year": 2024}"#;
    create.fill("textarea.body-param__text", body).await;
    create
        .fill(
            "tr[data-param-name=\"Idempotency-Key\"] input",
            "docs-page-test",
        )
        .await;
    let created = create.execute(201).await;
    assert_eq!(created.body["title"], "Written in a browser");
    let id = created.body["id"].as_i64().expect("an id");
    let tag = created.etag.expect("the create's ETag");

    // An update of that book with If-Match.
    let update = Operation::open(session, "updateBook").await;
    update
        .fill("tr[data-param-name=\"id\"] input", &id.to_string())
        .await;
    update
        .fill("tr[data-param-name=\"If-Match\"] input", &tag)
        .await;
    update.content_type("application/json").await;
    let body = r#"{"title": "Rewritten in a browser", "author_id": 3, "year": 2025}"#;
    update.fill("textarea.body-param__text", body).await;
    let updated = update.execute(200).await;
    assert_eq!(updated.body["title"], "Rewritten in a browser");
    assert_eq!(updated.body["id"], id);

    // Nothing logged at error level: no script error, no refusal by the page's policy
    // (an inline script, another origin), no failed request.
    let logged = session.console().await;
    let errors: Vec<&Value> = logged
        .iter()
        .filter(|entry| entry["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");

    // Every request the page made went to its own origin: the page, its assets, the
    // document and the three calls.
    let requests = session
        .script(
            "return performance.getEntriesByType('navigation')
                 .concat(performance.getEntriesByType('resource'))
                 .map(e => e.name);",
            json!([]),
        )
        .await;
    let requests: Vec<&str> = requests
        .as_array()
        .expect("names")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let elsewhere: Vec<&&str> = requests
        .iter()
        .filter(|url| !url.starts_with(&format!("{origin}/")))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "requests to other origins: {elsewhere:?}"
    );
    for expected in ["/api/docs/assets/", "/api/openapi.json", "/api/books?"] {
        assert!(
            requests.iter().any(|url| url.contains(expected)),
            "{expected} in {requests:?}"
        );
    }
    assert!(
        requests
            .iter()
            .filter(|url| url.contains(&format!("/api/books/{id}")))
            .count()
            == 1,
        "the update in {requests:?}"
    );
}

/// The `operationId` of every operation in `document`.
fn operation_ids(document: &Value) -> Vec<String> {
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let paths = document["paths"].as_object().expect("paths");
    let ids: Vec<String> = paths
        .values()
        .flat_map(|item| METHODS.iter().filter_map(|method| item.get(*method)))
        .map(|operation| operation["operationId"].as_str().expect("an id").to_owned())
        .collect();
    assert!(ids.len() >= 20, "{ids:?}");
    ids
}

/// One operation of the page, expanded, with "Try it out" on.
struct Operation<'s> {
    session: &'s Session,
    /// The CSS selector of its block.
    block: String,
}

/// What "Execute" showed: the request's URL, the answer's body and `ETag`.
struct Shown {
    url: String,
    body: Value,
    etag: Option<String>,
}

impl<'s> Operation<'s> {
    async fn open(session: &'s Session, id: &str) -> Operation<'s> {
        let block = format!("#operations-default-{id}");
        let summary = session
            .element(&format!("{block} .opblock-summary-control"), WAIT)
            .await;
        session.click(&summary).await;
        let try_it = session
            .element(&format!("{block} .try-out__btn"), WAIT)
            .await;
        session.click(&try_it).await;
        session.element(&format!("{block} .execute"), WAIT).await;
        Operation { session, block }
    }

    /// Types `text` over the field `css` selects in the block.
    async fn fill(&self, css: &str, text: &str) {
        let field = self
            .session
            .element(&format!("{} {css}", self.block), WAIT)
            .await;
        self.session.type_over(&field, text).await;
    }

    /// Chooses the request body's media type.
    async fn content_type(&self, media: &str) {
        let css = format!(
            "{} select.content-type option[value=\"{media}\"]",
            self.block
        );
        let option = self.session.element(&css, WAIT).await;
        self.session.click(&option).await;
    }

    /// Clicks "Execute" and waits for the answer, which must have `status`.
    async fn execute(&self, status: u16) -> Shown {
        let execute = self
            .session
            .element(&format!("{} .execute", self.block), WAIT)
            .await;
        self.session.click(&execute).await;
        let shown = self
            .session
            .until(
                "the answer shown",
                WAIT,
                "const block = document.querySelector(arguments[0]);
                 const status = block.querySelector('.live-responses-table tbody td.response-col_status');
                 const url = block.querySelector('.request-url pre');
                 const [body, headers] = block.querySelectorAll(
                     '.live-responses-table tbody td.response-col_description pre');
                 if (!status || !url || !body || !headers) return null;
                 const etag = headers.innerText.match(/etag: (\"[^\"]*\")/);
                 return {status: status.innerText.trim(), url: url.innerText.trim(),
                         body: body.innerText, etag: etag && etag[1]};",
                json!([self.block]),
            )
            .await;
        assert_eq!(shown["status"], status.to_string(), "{shown}");
        let text = shown["body"].as_str().expect("a body");
        Shown {
            url: shown["url"].as_str().expect("a URL").to_owned(),
            body: serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}")),
            etag: shown["etag"].as_str().map(str::to_owned),
        }
    }
}

/// A fresh browser profile, removed afterwards.
struct Profile(std::path::PathBuf);

impl Profile {
    fn new() -> Profile {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("books-docs-page-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a profile directory");
        Profile(dir)
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
