//! Maps a path and method to an endpoint, in the configured route scheme(s).

use std::fmt;

use http::Method;

use crate::config::{Config, RouteScheme};
#[cfg(feature = "docs-page")]
use crate::docs_page::DocsPath;
use crate::trace::UNMATCHED;

/// What a request asks for once routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Ping,
    /// The OpenAPI document.
    OpenApi,
    /// The reference page or one of its assets.
    #[cfg(feature = "docs-page")]
    Docs(DocsPath),
    /// The list; `action` says it was reached as `/books/list` (links follow the same path).
    List {
        action: bool,
    },
    /// A single read; `None` is an id segment that names no book.
    Get(Option<i64>),
    Create,
    Update(Option<i64>),
    Delete(Option<i64>),
}

/// The outcome of routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Routed {
    Endpoint(Endpoint),
    /// `OPTIONS` on a known path: the methods it serves.
    Options(Allow),
    MethodNotAllowed(Allow),
    NotFound,
}

/// Known paths (relative to the prefix) and the methods each serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Ping,
    OpenApi,
    #[cfg(feature = "docs-page")]
    Docs(DocsPath),
    Books,
    Book(Option<i64>),
    ListAction,
    CreateAction,
    UpdateAction(Option<i64>),
    DeleteAction(Option<i64>),
}

impl Resource {
    fn parse(path: &str, config: &Config) -> Option<Self> {
        let scheme = config.route_scheme();
        let trimmed = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        let mut segments = trimmed.strip_prefix('/')?.split('/');
        let resource = match (segments.next(), segments.next(), segments.next()) {
            (Some("ping"), None, _) => Self::Ping,
            (Some("openapi.json"), None, _) if config.openapi() => Self::OpenApi,
            #[cfg(feature = "docs-page")]
            (Some("docs"), second, third) if config.docs() => {
                let slash = trimmed.len() < path.len();
                Self::Docs(DocsPath::parse(second, third, segments.next(), slash)?)
            }
            (Some("books"), None, _) if scheme.index() => Self::Books,
            (Some("books"), Some("list"), None) if scheme.action() => Self::ListAction,
            (Some("books"), Some("create"), None) if scheme.action() => Self::CreateAction,
            (Some("books"), Some("update"), Some(id)) if scheme.action() => {
                Self::UpdateAction(parse_id(id))
            }
            (Some("books"), Some("delete"), Some(id)) if scheme.action() => {
                Self::DeleteAction(parse_id(id))
            }
            (Some("books"), Some(id), None) if !id.is_empty() => Self::Book(parse_id(id)),
            _ => return None,
        };
        match segments.next() {
            None => Some(resource),
            Some(_) => None,
        }
    }

    /// The path's template relative to the prefix: a metrics and log label.
    fn template(self) -> &'static str {
        match self {
            Self::Ping => "/ping",
            Self::OpenApi => "/openapi.json",
            #[cfg(feature = "docs-page")]
            Self::Docs(path) => path.template(),
            Self::Books => "/books",
            Self::Book(_) => "/books/{id}",
            Self::ListAction => "/books/list",
            Self::CreateAction => "/books/create",
            Self::UpdateAction(_) => "/books/update/{id}",
            Self::DeleteAction(_) => "/books/delete/{id}",
        }
    }

    fn endpoint(self, method: &Method, scheme: RouteScheme) -> Option<Endpoint> {
        let read = method == Method::GET || method == Method::HEAD;
        Some(match self {
            Self::Ping if read => Endpoint::Ping,
            Self::OpenApi if read => Endpoint::OpenApi,
            #[cfg(feature = "docs-page")]
            Self::Docs(path) if read => Endpoint::Docs(path),
            Self::Books if read => Endpoint::List { action: false },
            Self::Books if method == Method::POST => Endpoint::Create,
            Self::ListAction if read => Endpoint::List { action: true },
            Self::Book(id) if read => Endpoint::Get(id),
            Self::Book(id) if scheme.index() && method == Method::PUT => Endpoint::Update(id),
            Self::Book(id) if scheme.index() && method == Method::DELETE => Endpoint::Delete(id),
            Self::CreateAction if method == Method::POST => Endpoint::Create,
            Self::UpdateAction(id) if method == Method::PUT => Endpoint::Update(id),
            Self::DeleteAction(id) if method == Method::DELETE => Endpoint::Delete(id),
            _ => return None,
        })
    }
}

/// The methods a known path serves, for `Allow`: derived from [`Resource::endpoint`], the
/// one table, so the two cannot disagree. `OPTIONS` is always served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allow(u8);

impl Allow {
    /// In the order `Allow` lists them.
    const METHODS: [Method; 6] = [
        Method::DELETE,
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::POST,
        Method::PUT,
    ];

    fn of(resource: Resource, scheme: RouteScheme) -> Self {
        let served = |method: &Method| {
            method == Method::OPTIONS || resource.endpoint(method, scheme).is_some()
        };
        Self(
            Self::METHODS
                .iter()
                .enumerate()
                .filter(|(_, method)| served(method))
                .fold(0, |bits, (i, _)| bits | 1 << i),
        )
    }

    /// The `Allow` header value.
    pub(crate) fn header(self) -> http::HeaderValue {
        http::HeaderValue::try_from(self.to_string()).expect("method names are header-safe")
    }
}

impl fmt::Display for Allow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let served = Self::METHODS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & 1 << i != 0);
        for (n, (_, method)) in served.enumerate() {
            if n > 0 {
                f.write_str(", ")?;
            }
            f.write_str(method.as_str())?;
        }
        Ok(())
    }
}

/// A book id: decimal digits naming `1..=i64::MAX`; anything else names no book.
fn parse_id(segment: &str) -> Option<i64> {
    if segment.is_empty() || !segment.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    segment.parse::<i64>().ok().filter(|&id| id >= 1)
}

/// Routes `path` (already relative to the mount prefix, `""` for the prefix itself) in
/// the route scheme(s) and with the documents `config` serves. Also returns the route's
/// template ([`UNMATCHED`] when there is none).
pub(crate) fn route(path: &str, method: &Method, config: &Config) -> (Routed, &'static str) {
    let scheme = config.route_scheme();
    let Some(resource) = Resource::parse(path, config) else {
        return (Routed::NotFound, UNMATCHED);
    };
    let routed = if method == Method::OPTIONS {
        Routed::Options(Allow::of(resource, scheme))
    } else {
        match resource.endpoint(method, scheme) {
            Some(endpoint) => Routed::Endpoint(endpoint),
            None => Routed::MethodNotAllowed(Allow::of(resource, scheme)),
        }
    };
    (routed, resource.template())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(scheme: RouteScheme) -> Config {
        Config::default().with_route_scheme(scheme)
    }

    fn get(path: &str, scheme: RouteScheme) -> Routed {
        route(path, &Method::GET, &config(scheme)).0
    }

    #[test]
    fn templates_name_routes_not_paths() {
        let both = RouteScheme::Both;
        let template = |path, method| route(path, &method, &config(both)).1;
        assert_eq!(template("/books/7", Method::GET), "/books/{id}");
        assert_eq!(template("/books/x", Method::PATCH), "/books/{id}");
        assert_eq!(
            template("/books/update/9/", Method::PUT),
            "/books/update/{id}"
        );
        assert_eq!(template("/books/list", Method::OPTIONS), "/books/list");
        assert_eq!(template("/nope/7", Method::GET), UNMATCHED);
    }

    /// The `Allow` list of a 405 or `OPTIONS` answer.
    fn allow(routed: Routed) -> String {
        match routed {
            Routed::Options(allow) | Routed::MethodNotAllowed(allow) => allow.to_string(),
            other => panic!("no Allow: {other:?}"),
        }
    }

    #[test]
    fn index_and_action_paths() {
        use Endpoint::*;
        let both = RouteScheme::Both;
        assert_eq!(get("/ping", both), Routed::Endpoint(Ping));
        assert_eq!(get("/ping/", both), Routed::Endpoint(Ping));
        assert_eq!(get("/ping//", both), Routed::NotFound);
        assert_eq!(get("", both), Routed::NotFound);
        assert_eq!(get("/", both), Routed::NotFound);
        assert_eq!(
            get("/books", both),
            Routed::Endpoint(List { action: false })
        );
        assert_eq!(
            get("/books/list", both),
            Routed::Endpoint(List { action: true })
        );
        assert_eq!(get("/books/7", both), Routed::Endpoint(Get(Some(7))));
        assert_eq!(get("/books/7/", both), Routed::Endpoint(Get(Some(7))));
        assert_eq!(get("/books/7/x", both), Routed::NotFound);
        assert_eq!(get("/books//", both), Routed::NotFound);
        assert_eq!(
            route("/books/update/3", &Method::PUT, &config(both)).0,
            Routed::Endpoint(Update(Some(3)))
        );
        assert_eq!(
            allow(route("/books/update/3", &Method::GET, &config(both)).0),
            "OPTIONS, PUT"
        );
        assert_eq!(
            get("/books/list", RouteScheme::Index),
            Routed::Endpoint(Get(None))
        );
        assert_eq!(get("/books", RouteScheme::Action), Routed::NotFound);
        assert_eq!(
            allow(route("/books/3", &Method::PUT, &config(RouteScheme::Action)).0),
            "GET, HEAD, OPTIONS"
        );
        assert_eq!(
            route(
                "/books/delete/3",
                &Method::DELETE,
                &config(RouteScheme::Index)
            )
            .0,
            Routed::NotFound
        );
        assert_eq!(
            allow(route("/books", &Method::OPTIONS, &config(both)).0),
            "GET, HEAD, OPTIONS, POST"
        );
        for (path, methods) in [
            ("/ping", "GET, HEAD, OPTIONS"),
            ("/books/list", "GET, HEAD, OPTIONS"),
            ("/books/7", "DELETE, GET, HEAD, OPTIONS, PUT"),
            ("/books/create", "OPTIONS, POST"),
            ("/books/delete/7", "DELETE, OPTIONS"),
        ] {
            assert_eq!(
                allow(route(path, &Method::PATCH, &config(both)).0),
                methods,
                "{path}"
            );
        }
    }

    #[cfg(feature = "docs-page")]
    #[test]
    fn the_docs_page_when_served() {
        let on = Config::default().with_docs(true);
        let routed = |path, method: Method, config: &Config| route(path, &method, config);
        assert!(matches!(
            routed("/docs", Method::GET, &on),
            (
                Routed::Endpoint(Endpoint::Docs(DocsPath::Page { slash: false })),
                "/docs"
            )
        ));
        assert!(matches!(
            routed("/docs/", Method::HEAD, &on).0,
            Routed::Endpoint(Endpoint::Docs(DocsPath::Page { slash: true }))
        ));
        assert_eq!(
            allow(routed("/docs", Method::POST, &on).0),
            "GET, HEAD, OPTIONS"
        );
        assert_eq!(
            routed("/docs/assets/0/swagger-ui.css", Method::PUT, &on).1,
            "/docs/assets/{version}/{file}"
        );
        for missing in [
            "/docs//",
            "/docs/assets",
            "/docs/assets/0",
            "/docs/assets/0/nope.js",
            "/docs/assets/0/swagger-ui.css/x",
            "/docs/index.html",
        ] {
            assert_eq!(
                routed(missing, Method::GET, &on).0,
                Routed::NotFound,
                "{missing}"
            );
        }
        let off = Config::default();
        assert_eq!(routed("/docs", Method::GET, &off).0, Routed::NotFound);
        let no_document = on.with_openapi(false);
        assert_eq!(
            routed("/docs", Method::GET, &no_document).0,
            Routed::NotFound
        );
    }

    #[test]
    fn ids() {
        for bad in [
            "abc",
            "-1",
            "0",
            "1.5",
            "9223372036854775808",
            "+1",
            " 1",
            "",
        ] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
        assert_eq!(parse_id("9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_id("007"), Some(7));
    }
}
