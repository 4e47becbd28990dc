//! [`BooksApi`]: the entry point a binding hands requests to.

use std::sync::Arc;

use bytes::Bytes;
use chrono::Datelike;
use http::header::{ALLOW, AUTHORIZATION, HeaderValue, LOCATION};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use subtle::ConstantTimeEq;

use crate::body;
use crate::config::Config;
use crate::negotiate::{Format, negotiate};
use crate::pagination::{Links, Meta};
use crate::problem::Problem;
use crate::query::{self, Includes};
use crate::render::{self, BookView, Deleted, PageView, Ping};
use crate::route::{Endpoint, Routed, route};
use crate::store::BookStore;
use crate::validate::validate;

/// The books API over one store and one configuration. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct BooksApi {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn BookStore>,
    config: Config,
    /// The OpenAPI document as served, when the configuration serves it.
    openapi: Option<Bytes>,
}

type Handled = Result<Response<Bytes>, Problem>;

impl BooksApi {
    /// An API serving `store` as `config` says.
    pub fn new(store: impl BookStore, config: Config) -> Self {
        Self::from_arc(Arc::new(store), config)
    }

    /// An API over a store that is already shared.
    pub fn from_arc(store: Arc<dyn BookStore>, config: Config) -> Self {
        let openapi = config.openapi().then(|| crate::openapi::served(&config));
        Self {
            inner: Arc::new(Inner {
                store,
                config,
                openapi,
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Whether `path` lies under the mount prefix. A binding hands every other path
    /// back to its host (in warp: a rejection).
    pub fn owns(&self, path: &str) -> bool {
        self.relative(path).is_some()
    }

    fn relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.inner.config.prefix())?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }

    /// Answers one request. Never panics on client input; a path outside the prefix
    /// gets the API's own 404 (check [`owns`](Self::owns) first to route it elsewhere).
    ///
    /// The body is read only by writes, and only up to the configured limit (413 beyond).
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Bytes>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let mut response = self.respond(&parts, body).await;
        if parts.method == Method::HEAD {
            *response.body_mut() = Bytes::new();
        }
        response
    }

    async fn respond<B>(&self, parts: &http::request::Parts, body: B) -> Response<Bytes>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let format = negotiate(&parts.headers);
        let routed = match self.relative(parts.uri.path()) {
            Some(path) => route(
                path,
                &parts.method,
                self.inner.config.route_scheme(),
                self.inner.openapi.is_some(),
            ),
            None => Routed::NotFound,
        };
        if let Routed::Options(allow) = routed {
            let mut response = Response::new(Bytes::new());
            *response.status_mut() = StatusCode::NO_CONTENT;
            response.headers_mut().insert(ALLOW, allow.header());
            return response;
        }
        let Some(format) = format else {
            return render::problem(&Problem::not_acceptable(), Format::Json);
        };
        let result = match routed {
            Routed::Endpoint(endpoint) => self.dispatch(endpoint, parts, body, format).await,
            Routed::MethodNotAllowed(allow) => Err(Problem::method_not_allowed(allow)),
            Routed::NotFound | Routed::Options(_) => Err(Problem::not_found()),
        };
        result.unwrap_or_else(|problem| render::problem(&problem, format))
    }

    async fn dispatch<B>(
        &self,
        endpoint: Endpoint,
        parts: &http::request::Parts,
        body: B,
        format: Format,
    ) -> Handled
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let query = parts.uri.query();
        if matches!(
            endpoint,
            Endpoint::Create | Endpoint::Update(_) | Endpoint::Delete(_)
        ) {
            self.authorize(&parts.headers)?;
        }
        match endpoint {
            Endpoint::Ping => Ok(self.ping(format)),
            Endpoint::OpenApi => Ok(render::document(
                self.inner.openapi.clone().unwrap_or_default(),
            )),
            Endpoint::List { action } => self.list(query, action, format).await,
            Endpoint::Get(id) => self.get(id, query::includes(query)?, format).await,
            // Boxed: the write path's state (body, multipart, validation) would otherwise
            // make every read's future several times larger, and costlier to move.
            Endpoint::Create | Endpoint::Update(_) => {
                Box::pin(self.write(endpoint, parts, body, format)).await
            }
            Endpoint::Delete(id) => {
                let id = id.ok_or_else(Problem::book_not_found)?;
                if !self.inner.store.delete(id).await? {
                    return Err(Problem::book_not_found());
                }
                Ok(render::success(
                    StatusCode::OK,
                    format,
                    "deleted",
                    &Deleted { id },
                ))
            }
        }
    }

    /// Create and update: read and decode the body, validate, write, reload.
    async fn write<B>(
        &self,
        endpoint: Endpoint,
        parts: &http::request::Parts,
        body: B,
        format: Format,
    ) -> Handled
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let query = parts.uri.query();
        let includes = query::includes(query)?;
        let limit = self.inner.config.body_limit();
        let bytes = body::read(&parts.headers, body, limit).await?;
        let fields = body::decode(&parts.headers, bytes).await?;
        let now = self.inner.config.now();
        let input = validate(fields, &*self.inner.store, now.year()).await?;
        if let Endpoint::Update(id) = endpoint {
            let id = id.ok_or_else(Problem::book_not_found)?;
            if !self.inner.store.update(id, &input, now).await? {
                return Err(Problem::book_not_found());
            }
            return self.get(Some(id), includes, format).await;
        }
        let id = self.inner.store.create(&input, now).await?;
        let mut response = self.get(Some(id), includes, format).await?;
        *response.status_mut() = StatusCode::CREATED;
        let location = format!("{}/books/{id}", self.mount_url());
        let location = HeaderValue::try_from(location).map_err(|_| Problem::internal())?;
        response.headers_mut().insert(LOCATION, location);
        Ok(response)
    }

    /// Checks the bearer token writes need, if one is configured (constant time).
    fn authorize(&self, headers: &http::HeaderMap) -> Result<(), Problem> {
        let Some(expected) = self.inner.config.write_token() else {
            return Ok(());
        };
        let given = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
            Ok(())
        } else {
            Err(Problem::unauthorized())
        }
    }

    fn ping(&self, format: Format) -> Response<Bytes> {
        let config = &self.inner.config;
        let extended = config.extended_ping();
        let ping = Ping {
            status: "ok",
            time: extended.then(|| {
                config
                    .now()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            }),
            version: extended.then_some(crate::VERSION),
        };
        render::success(StatusCode::OK, format, "ping", &ping)
    }

    async fn list(&self, query: Option<&str>, action: bool, format: Format) -> Handled {
        let (page, includes) = query::page_and_includes(query)?;
        let per_page = self.inner.config.page_size().get();
        let found = self
            .inner
            .store
            .list(Meta::offset(page, per_page), per_page)
            .await?;
        let meta = Meta::new(page, per_page, found.total);
        let list_url = format!(
            "{}/books{}",
            self.mount_url(),
            if action { "/list" } else { "" }
        );
        let links = Links::new(&list_url, &meta, includes);
        let view = PageView {
            data: found
                .books
                .iter()
                .map(|b| BookView::new(b, includes))
                .collect(),
            meta,
            links,
        };
        Ok(render::success(StatusCode::OK, format, "books", &view))
    }

    async fn get(&self, id: Option<i64>, includes: Includes, format: Format) -> Handled {
        let id = id.ok_or_else(Problem::book_not_found)?;
        let book = self
            .inner
            .store
            .get(id)
            .await?
            .ok_or_else(Problem::book_not_found)?;
        let view = BookView::new(&book, includes);
        Ok(render::success(StatusCode::OK, format, "book", &view))
    }

    /// `base_url` + prefix: where links start.
    fn mount_url(&self) -> String {
        format!(
            "{}{}",
            self.inner.config.base_url(),
            self.inner.config.prefix()
        )
    }
}
