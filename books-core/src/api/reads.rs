//! The read handlers: ping, the OpenAPI document, the list and one book, the last two
//! through the cache of rendered answers.

use std::sync::Arc;

use bytes::Bytes;
use chrono::DateTime;
use http::{Response, StatusCode};

use super::{BooksApi, Handled};
use crate::cache::{Key, PageRows, Rendered, Source, copy, read_through};
use crate::compression;
use crate::list_params::{self, ListRequest};
use crate::metrics::store_call;
use crate::negotiate::Format;
use crate::pagination::{Links, Meta};
use crate::problem::Problem;
use crate::query::Includes;
use crate::render::{self, BookView, PageView, Ping};
use crate::stamp;
use crate::store::ListQuery;

impl BooksApi {
    /// The ping answer, rendered once per second and format (the extended ping's time has
    /// whole seconds) and copied from then on: rendering it cost more than the rest of
    /// the API's part of a ping (`scripts/load.py --instructions --workloads ping`).
    pub(super) fn ping(&self, format: Format) -> Response<Bytes> {
        let config = &self.inner.config;
        let extended = config.extended_ping();
        let second = if extended { config.unix_seconds() } else { 0 };
        let mut pings = self
            .inner
            .pings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let slot = &mut pings[usize::from(format == Format::Xml)];
        match slot {
            Some((at, answer)) if *at == second => copy(answer),
            _ => {
                let ping = Ping {
                    status: "ok",
                    time: extended.then(|| {
                        let now = DateTime::from_timestamp(second, 0).unwrap_or_default();
                        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    }),
                    version: extended.then_some(crate::api::VERSION),
                };
                let mut answer = render::success(StatusCode::OK, format, "ping", &ping);
                // Slots for each copy's request id and date, as the cache's answers keep;
                // the extended ping's `Date` is its body's second, filled here once.
                stamp::keep_slots(answer.headers_mut(), extended.then_some(second));
                let copied = copy(&answer);
                *slot = Some((second, answer));
                copied
            }
        }
    }

    /// The OpenAPI document, made on its first request.
    pub(super) fn openapi(&self) -> Response<Bytes> {
        let document = self
            .inner
            .openapi
            .get_or_init(|| crate::openapi::served(&self.inner.config));
        self.varying(render::document(document.clone()))
    }

    pub(super) async fn list(
        &self,
        parts: &http::request::Parts,
        action: bool,
        format: Format,
    ) -> Handled {
        let request = list_params::list_request(parts.uri.query())?;
        if !request.is_plain() && !self.inner.store.list_queries {
            return Err(Problem::list_queries_unsupported());
        }
        let key = Key::List {
            page: request.page,
            author: request.includes.author,
            action,
            xml: format == Format::Xml,
            query: (!request.is_plain()).then(|| Arc::from(request.carried.as_str())),
        };
        let inner = &self.inner;
        read_through(inner.cache.as_ref(), key, &parts.headers, |source| {
            self.render_list(source, &request, action, format)
        })
        .await
    }

    /// A page's answer: read (with the count it was read at, when cached), or a kept
    /// page's rows under a new total. A filtered or sorted page keeps no rows: a create
    /// may land anywhere in it, and its total is not the books' total.
    async fn render_list(
        &self,
        source: Source,
        request: &ListRequest,
        action: bool,
        format: Format,
    ) -> Result<Rendered, Problem> {
        let (page, includes) = (request.page, request.includes);
        let per_page = self.inner.config.page_size().get();
        let (rows, count) = match source {
            Source::Rows(rows, total) => {
                let rows = PageRows {
                    books: rows.books.clone(),
                    full: rows.full,
                    total,
                };
                (rows, None)
            }
            Source::Read => {
                let query = ListQuery::new(Meta::offset(page, per_page), per_page)
                    .with_filter(request.filter.clone())
                    .with_sort(request.sort.clone());
                let store = &*self.inner.store.data;
                let (found, count) = match self.versions() {
                    Some(versions) => {
                        let (found, count) =
                            store_call("list", versions.list_versioned(&query)).await?;
                        (found, Some(count))
                    }
                    None => (store_call("list", store.list(&query)).await?, None),
                };
                let rows = PageRows {
                    full: found.books.len() == per_page as usize,
                    books: found.books,
                    total: found.total,
                };
                (rows, count)
            }
        };
        let meta = Meta::new(page, per_page, rows.total);
        let list_url = format!(
            "{}/books{}",
            self.mount_url(),
            if action { "/list" } else { "" }
        );
        let links = Links::new(&list_url, &meta, includes, &request.carried);
        let view = PageView {
            data: rows
                .books
                .iter()
                .map(|b| BookView::new(b, includes))
                .collect(),
            meta,
            links,
        };
        let answer = render::success(StatusCode::OK, format, "books", &view);
        let answer = self.varying(render::representation(answer, &self.inner.cache_control));
        Ok(Rendered {
            answer,
            count,
            rows: request.is_plain().then(|| Arc::new(rows)),
        })
    }

    /// One book, reusing a rendered answer while the store's version holds.
    pub(super) async fn get(
        &self,
        parts: &http::request::Parts,
        id: Option<i64>,
        includes: Includes,
        format: Format,
    ) -> Handled {
        let id = id.ok_or_else(Problem::book_not_found)?;
        let key = Key::Book {
            id,
            author: includes.author,
            xml: format == Format::Xml,
        };
        let inner = &self.inner;
        read_through(inner.cache.as_ref(), key, &parts.headers, |_| {
            self.read_book(id, includes, format)
        })
        .await
    }

    /// A book's answer, and the count it was read at when cached.
    async fn read_book(
        &self,
        id: i64,
        includes: Includes,
        format: Format,
    ) -> Result<Rendered, Problem> {
        let (book, count) = match self.versions() {
            Some(versions) => {
                let (book, count) = store_call("get", versions.get_versioned(id)).await?;
                (book, Some(count))
            }
            None => (
                store_call("get", self.inner.store.data.get(id)).await?,
                None,
            ),
        };
        let book = book.ok_or_else(Problem::book_not_found)?;
        let answer = render::book(&book, includes, format, &self.inner.cache_control);
        Ok(Rendered {
            answer: self.varying(answer),
            count,
            rows: None,
        })
    }

    /// The store's versions tier, when reads are cached (and so must carry a count).
    fn versions(&self) -> Option<&dyn crate::store::Versions> {
        self.inner.cache.as_ref().and_then(|cache| cache.versions())
    }

    /// A GET answer that may have encoded variants, its `Vary` naming `Accept-Encoding`
    /// too when answers are compressed.
    fn varying(&self, mut answer: Response<Bytes>) -> Response<Bytes> {
        if self.inner.config.compression() {
            compression::vary(&mut answer);
        }
        answer
    }

    /// `base_url` + prefix: where links start.
    pub(super) fn mount_url(&self) -> String {
        format!(
            "{}{}",
            self.inner.config.base_url(),
            self.inner.config.prefix()
        )
    }
}
