//! The whole HTTP contract through tower: `BooksApi` as a `Service`, the `MountLayer` in
//! front of a host's service, and axum `Router`s mounting it each way axum can; host
//! routes beside the API keep answering in each.

use std::convert::Infallible;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use books_core::store::AuthorStore;
use books_core::testing::Harness;
use books_core::{BooksApi, Config};
use books_memstore::MemStore;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

type Boxed = BoxCloneSyncService<Request<Full<Bytes>>, Response<Bytes>, Infallible>;

/// Any service answering `http` requests, its answers collected whole.
fn boxed<S, B>(service: S) -> Boxed
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Debug,
{
    BoxCloneSyncService::new(service.and_then(|response: Response<B>| async move {
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("whole body").to_bytes();
        Ok(Response::from_parts(parts, body))
    }))
}

/// One API instance behind some service.
struct Through {
    service: Boxed,
    store: MemStore,
}

#[async_trait]
impl Harness for Through {
    async fn send(&self, request: Request<Bytes>) -> Response<Bytes> {
        let request = request.map(Full::new);
        let Ok(response) = self.service.clone().oneshot(request).await;
        response
    }

    async fn add_author(&self, name: Option<&str>) -> i64 {
        self.store.add_author(name).await.unwrap()
    }

    async fn remove_author(&self, id: i64) {
        self.store.remove_author(id).await.unwrap();
    }
}

fn api(config: Config) -> (BooksApi, MemStore) {
    let store = MemStore::new();
    (BooksApi::new(store.clone(), config), store)
}

async fn get_text(service: &Boxed, path: &str) -> (StatusCode, String) {
    let request = Request::get(path).body(Full::default()).unwrap();
    let Ok(response) = service.clone().oneshot(request).await;
    let body = String::from_utf8(response.body().to_vec()).unwrap();
    (response.status(), body)
}

/// A host's own service: `/health` answers, everything else is the host's 404.
fn host_service() -> impl tower::Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(|request: Request<Full<Bytes>>| async move {
        let (status, body) = match request.uri().path() {
            "/health" => (StatusCode::OK, "up"),
            _ => (StatusCode::NOT_FOUND, "host: not found"),
        };
        let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *response.status_mut() = status;
        Ok(response)
    })
}

mod as_a_service {
    use super::*;

    async fn bare(config: Config) -> Through {
        let (api, store) = api(config);
        Through {
            service: boxed(api),
            store,
        }
    }
    books_core::http_contract_suite!(bare);
}

mod behind_the_mount_layer {
    use super::*;

    async fn mounted(config: Config) -> Through {
        let (api, store) = api(config);
        Through {
            service: boxed(api.layer().layer(host_service())),
            store,
        }
    }
    books_core::http_contract_suite!(mounted);

    #[tokio::test]
    async fn host_service_answers_every_other_path() {
        let service = mounted(Config::default()).await.service;
        assert_eq!(
            get_text(&service, "/health").await,
            (StatusCode::OK, "up".into())
        );
        assert_eq!(
            get_text(&service, "/books").await,
            (StatusCode::NOT_FOUND, "host: not found".into()),
            "outside the prefix: the host's, even where the API has a route"
        );
        assert_eq!(get_text(&service, "/apis").await.1, "host: not found");
        assert_eq!(get_text(&service, "/api/ping").await.0, StatusCode::OK);
    }
}

/// Host state shared by the host's own handlers.
#[derive(Clone)]
struct HostState {
    greeting: Arc<str>,
}

async fn hello(State(state): State<HostState>) -> String {
    state.greeting.to_string()
}

fn host_router() -> Router<HostState> {
    Router::new().route("/hello", get(hello))
}

fn host_state() -> HostState {
    HostState {
        greeting: "hello from the host".into(),
    }
}

mod in_axum {
    use super::*;

    /// The API as axum users mount a service: `nest_service` at its prefix.
    async fn nested(config: Config) -> Through {
        let prefix = config.prefix().to_owned();
        let (api, store) = api(config);
        let router = host_router()
            .nest_service(&prefix, api.nested())
            .with_state(host_state());
        Through {
            service: boxed(router),
            store,
        }
    }
    books_core::http_contract_suite!(nested);

    /// Every way axum mounts a service serves the API and keeps the host's routes.
    #[tokio::test]
    async fn nest_route_fallback_service_and_layer_all_work() {
        let (api, _) = api(Config::default());
        let routers = [
            (
                "nest_service",
                host_router().nest_service("/api", api.nested()),
            ),
            (
                "route_service",
                host_router()
                    .route_service("/api", api.clone())
                    .route_service("/api/{*rest}", api.clone()),
            ),
            (
                "fallback_service",
                host_router().fallback_service(api.clone()),
            ),
            ("layer", host_router().layer(api.layer())),
        ];
        for (how, router) in routers {
            let service = boxed(router.with_state(host_state()));
            assert_eq!(
                get_text(&service, "/hello").await,
                (StatusCode::OK, "hello from the host".into()),
                "{how}"
            );
            let (status, body) = get_text(&service, "/api/ping").await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::OK, r#"{"status":"ok"}"#),
                "{how}"
            );
            let (status, body) = get_text(&service, "/api/books?page=1").await;
            assert_eq!(status, StatusCode::OK, "{how}");
            assert!(
                body.contains(r#""self":"http://localhost:8080/api/books?page=1""#),
                "{how}: {body}"
            );
            let (status, body) = get_text(&service, "/api/nope").await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{how}");
            assert!(
                body.contains("Not found"),
                "{how}: the API's own 404, not a silent one"
            );
            // The prefix twice is no route: a path a router stripped is not read as
            // prefixed again.
            let (status, _) = get_text(&service, "/api/api/books").await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{how}: /api/api/books");
        }
    }
}
