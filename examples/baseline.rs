//! Load-test baselines: answers given paths with precomputed bytes, from bare hyper
//! (HTTP/1.1, or `hyper-h2`: HTTP/2 with prior knowledge) or bare warp, with the
//! server's socket settings (TCP_NODELAY, same runtime). Used by `scripts/load.py`; not
//! an example to copy.
//!
//! `baseline <hyper|hyper-h2|warp> <listen> <path>=<status>:<content-type>:<body file> ...`

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use warp::Filter;

type Answers = Arc<HashMap<String, (StatusCode, String, Bytes)>>;

fn answer(answers: &Answers, path_and_query: &str) -> Response<Bytes> {
    let Some((status, content_type, body)) = answers.get(path_and_query) else {
        let mut response = Response::new(Bytes::new());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let mut response = Response::new(body.clone());
    *response.status_mut() = *status;
    let headers = response.headers_mut();
    headers.insert("content-type", content_type.parse().unwrap());
    headers.insert("vary", "Accept".parse().unwrap());
    headers.insert("content-length", body.len().into());
    response
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kind, listen) = (args[0].clone(), args[1].clone());
    let answers: Answers = Arc::new(
        args[2..]
            .iter()
            .map(|spec| {
                let (path, rest) = spec.rsplit_once('=').expect("path=status:type:file");
                let mut parts = rest.splitn(3, ':');
                let status = StatusCode::from_u16(parts.next().unwrap().parse().unwrap()).unwrap();
                let content_type = parts.next().unwrap().replace("%3B", ";");
                let body = Bytes::from(std::fs::read(parts.next().unwrap()).expect("body file"));
                (path.to_owned(), (status, content_type, body))
            })
            .collect(),
    );
    let listener = TcpListener::bind(&listen).await.unwrap();
    println!(
        "baseline {kind} listening on http://{}",
        listener.local_addr().unwrap()
    );
    let warp_answers = answers.clone();
    let filter = warp::path::full()
        .and(warp::query::raw().or(warp::any().map(String::new)).unify())
        .map(move |path: warp::path::FullPath, query: String| {
            let key = if query.is_empty() {
                path.as_str().to_owned()
            } else {
                format!("{}?{query}", path.as_str())
            };
            answer(&warp_answers, &key)
        });
    let warp_service = warp::service(filter);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(10))
        .max_buf_size(16 * 1024);
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new());
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        if kind == "warp" {
            let connection =
                builder.serve_connection(io, TowerToHyperService::new(warp_service.clone()));
            tokio::spawn(connection);
        } else {
            let answers = answers.clone();
            let handler = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let key = request
                    .uri()
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_owned();
                let response = answer(&answers, &key);
                async move { Ok::<_, Infallible>(response.map(http_body_util::Full::new)) }
            });
            if kind == "hyper-h2" {
                tokio::spawn(h2.serve_connection(io, handler));
            } else {
                tokio::spawn(builder.serve_connection(io, handler));
            }
        }
    }
}
