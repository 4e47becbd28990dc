//! The interactive reference page (`GET {prefix}/docs`, feature `docs-page`): Swagger UI
//! over `{prefix}/openapi.json`, every file of it built in (from `books-docs-assets`, a
//! crate of its own that only this feature downloads) and served from the API's own
//! origin.
//!
//! The page is HTML with no inline script or style, sent with [`CSP`]; it loads
//! Swagger UI's bundle and stylesheet (`books-docs-assets/assets/swagger-ui/`, swagger-ui-dist as
//! published, see the README there) and `docs-page.js`, which starts the UI on the
//! document and points "try it" at the server that served the page. Every URL in the
//! page is relative, so any base URL and prefix work, with or without the trailing
//! slash on `/docs`.
//!
//! Assets live under `{prefix}/docs/assets/{version}/{file}`, where the version is a
//! hash of every asset: they are sent with `Cache-Control: public, max-age=31536000,
//! immutable` and a strong `ETag`, and compressed as the API's answers are (the same
//! `Accept-Encoding` negotiation and variant tags), each encoding made once per process
//! and kept here rather than in the bounded cache of answers. A request for a known file
//! under another version (a page from another release, behind the same address) gets
//! the current file with `no-cache`. The page itself is `no-cache`.

use std::sync::{LazyLock, OnceLock};

use books_docs_assets::{FILES, PAGE};
use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_LENGTH, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HeaderValue, VARY,
    X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderMap, Response, StatusCode};

use crate::compression::{self, Coding};
use crate::etag;

/// The page's `Content-Security-Policy`: everything from the API's own origin, images
/// also from `data:` URLs (Swagger UI's stylesheet draws its icons with them); no
/// plugins, no `<base>`, no framing by other origins and no form posts.
const CSP: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; \
                              base-uri 'none'; frame-ancestors 'self'; form-action 'self'";

/// `Cache-Control` of an asset under the current version.
const IMMUTABLE: HeaderValue = HeaderValue::from_static("public, max-age=31536000, immutable");
const NO_CACHE: HeaderValue = HeaderValue::from_static("no-cache");
const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
const VARY_ENCODING: HeaderValue = HeaderValue::from_static("Accept-Encoding");

/// What is made once per process from the files: their version, their tags and the page.
struct Built {
    version: String,
    tags: Vec<HeaderValue>,
    /// The page as served at `/docs` and at `/docs/`, with its tag.
    pages: [(Bytes, HeaderValue); 2],
    /// Each file's compressed bodies, one slot per [`Coding`] (`None`: the encoder failed).
    encoded: Vec<[OnceLock<Option<Bytes>>; 3]>,
}

static BUILT: LazyLock<Built> = LazyLock::new(|| {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for file in &FILES {
        hasher.update(file.name.as_bytes());
        hasher.update(&[0]);
        hasher.update(file.body);
    }
    let version = format!("{:016x}", hasher.digest());
    let page = |root: &str| {
        let html = PAGE.replace("{root}", root).replace("{version}", &version);
        let tag = etag::for_body(b"text/html", html.as_bytes());
        (Bytes::from(html), tag)
    };
    Built {
        tags: FILES
            .iter()
            .map(|file| etag::for_body(file.content_type.as_bytes(), file.body))
            .collect(),
        pages: [page("./"), page("../")],
        encoded: FILES.iter().map(|_| Default::default()).collect(),
        version,
    }
});

/// A path under `/docs` that names something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocsPath {
    /// The page; `slash` says it was asked for as `/docs/` (its relative URLs go one up).
    Page { slash: bool },
    /// `/docs/assets/{version}/{file}`.
    Asset(AssetRef),
}

impl DocsPath {
    /// The path from the segments after `docs` (at most three; the router checks that
    /// none follows), `None` where it names nothing.
    pub(crate) fn parse(
        second: Option<&str>,
        third: Option<&str>,
        fourth: Option<&str>,
        slash: bool,
    ) -> Option<Self> {
        match (second, third, fourth) {
            (None, _, _) => Some(Self::Page { slash }),
            (Some("assets"), Some(version), Some(file)) => find(version, file).map(Self::Asset),
            _ => None,
        }
    }

    /// The route's template (a metrics and log label).
    pub(crate) fn template(self) -> &'static str {
        match self {
            Self::Page { .. } => "/docs",
            Self::Asset(_) => "/docs/assets/{version}/{file}",
        }
    }

    /// The answer to a GET (HEAD, its headers) of this path.
    pub(crate) fn answer(self, compression: bool) -> Response<Bytes> {
        match self {
            Self::Page { slash } => page(slash, compression),
            Self::Asset(found) => asset(found, compression),
        }
    }

    /// Compresses this path's answer for `request` as [`compression::encode`] does, an
    /// asset's encoded body made once and kept with it (the page is too small to encode).
    pub(crate) fn encode(self, request: &HeaderMap, response: &mut Response<Bytes>) {
        if let Self::Asset(found) = self {
            let slots = &BUILT.encoded[usize::from(found.index)];
            compression::encode_with(request, response, |coding: Coding, _, body: &Bytes| {
                slots[coding.slot()]
                    .get_or_init(|| coding.compress(body).map(Bytes::from))
                    .clone()
            });
        }
    }
}

/// A known asset, and whether its path named the current version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AssetRef {
    index: u8,
    current: bool,
}

/// The asset `/docs/assets/{version}/{name}` names, `None` for no file of ours.
fn find(version: &str, name: &str) -> Option<AssetRef> {
    let index = FILES.iter().position(|file| file.name == name)?;
    Some(AssetRef {
        index: u8::try_from(index).ok()?,
        current: version == BUILT.version,
    })
}

/// The page; `slash` says it was asked for as `/docs/` (its relative URLs go one up).
fn page(slash: bool, compression: bool) -> Response<Bytes> {
    let (body, tag) = &BUILT.pages[usize::from(slash)];
    let mut answer = response(
        "text/html; charset=utf-8",
        body.clone(),
        tag.clone(),
        NO_CACHE,
        compression,
    );
    answer
        .headers_mut()
        .insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    answer
}

/// An asset, immutable under its current version's path.
fn asset(asset: AssetRef, compression: bool) -> Response<Bytes> {
    let file = &FILES[usize::from(asset.index)];
    let cache_control = if asset.current { IMMUTABLE } else { NO_CACHE };
    response(
        file.content_type,
        Bytes::from_static(file.body),
        BUILT.tags[usize::from(asset.index)].clone(),
        cache_control,
        compression,
    )
}

fn response(
    content_type: &'static str,
    body: Bytes,
    tag: HeaderValue,
    cache_control: HeaderValue,
    compression: bool,
) -> Response<Bytes> {
    let length = HeaderValue::from(body.len());
    let mut answer = Response::new(body);
    *answer.status_mut() = StatusCode::OK;
    let headers = answer.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_LENGTH, length);
    headers.insert(ETAG, tag);
    headers.insert(CACHE_CONTROL, cache_control);
    headers.insert(X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    if compression {
        headers.insert(VARY, VARY_ENCODING);
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_asset_under_the_current_version_by_relative_urls() {
        for (slash, root) in [(false, "./"), (true, "../")] {
            let page = page(slash, true);
            let html = std::str::from_utf8(page.body()).unwrap();
            for name in ["swagger-ui-bundle.js", "swagger-ui.css", "docs-page.js"] {
                let url = format!("\"{root}docs/assets/{}/{name}\"", BUILT.version);
                assert!(html.contains(&url), "{url} in {html}");
            }
            assert!(html.contains(&format!("data-root=\"{root}\"")));
            assert!(!html.contains("{root}") && !html.contains("{version}"));
            assert!(!html.contains("<script>") && !html.contains("style="));
            assert!(!html.contains("http:") && !html.contains("https:"));
        }
    }

    #[test]
    fn versions_and_files() {
        let version = BUILT.version.clone();
        let current = find(&version, "swagger-ui.css").unwrap();
        assert!(current.current);
        assert!(!find("0123", "swagger-ui.css").unwrap().current);
        assert_eq!(find(&version, "index.html"), None);
        assert_eq!(find(&version, ""), None);
        let answer = asset(current, false);
        assert_eq!(answer.headers()[CACHE_CONTROL], IMMUTABLE);
        assert_eq!(answer.headers()[CONTENT_TYPE], "text/css; charset=utf-8");
        assert!(answer.headers().get(VARY).is_none());
        let stale = asset(find("0123", "swagger-ui.css").unwrap(), true);
        assert_eq!(stale.headers()[CACHE_CONTROL], NO_CACHE);
        assert_eq!(stale.headers()[ETAG], answer.headers()[ETAG]);
    }
}
