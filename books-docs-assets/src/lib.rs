//! The files of the books API's interactive reference page (`GET {prefix}/docs`), built
//! in: Swagger UI's bundle, stylesheet and icon (`assets/swagger-ui/`, swagger-ui-dist
//! as published, Apache-2.0) and the page around them. `books-core` serves them with its
//! `docs-page` feature; this crate only holds them, so a build without the page downloads
//! none of their 2 MB.

/// One file the page loads.
#[derive(Debug, Clone, Copy)]
pub struct File {
    /// Its name under the page's asset path.
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file the page loads.
pub const FILES: [File; 6] = [
    File {
        name: "swagger-ui-bundle.js",
        content_type: JS,
        body: include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js"),
    },
    File {
        name: "swagger-ui.css",
        content_type: CSS,
        body: include_bytes!("../assets/swagger-ui/swagger-ui.css"),
    },
    File {
        name: "docs-page.js",
        content_type: JS,
        body: include_bytes!("../assets/docs-page.js"),
    },
    File {
        name: "docs-page.css",
        content_type: CSS,
        body: include_bytes!("../assets/docs-page.css"),
    },
    File {
        name: "favicon-32x32.png",
        content_type: "image/png",
        body: include_bytes!("../assets/swagger-ui/favicon-32x32.png"),
    },
    // The bundle's first line points readers here for its parts' licences.
    File {
        name: "swagger-ui-bundle.js.LICENSE.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js.LICENSE.txt"),
    },
];

/// The page, with `{root}` (the way back to the API's prefix) and `{version}` (the
/// assets' version) to fill in.
pub const PAGE: &str = include_str!("../assets/docs-page.html");
