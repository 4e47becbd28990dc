//! Cross-origin access for browser apps on other origins (the Fetch standard's CORS
//! protocol), for the origins the operator names and no others.
//!
//! Not tower-http's `CorsLayer`: it takes every `OPTIONS` request for a preflight (the
//! API's own `OPTIONS` answer, with `Allow`, would be lost), sends its method, header
//! and `Max-Age` fields to every origin, allowed or not, and allows one list of methods
//! for every path; here a preflight is `OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`, only a named origin gets any `Access-Control-*`
//! field, and a preflight is allowed the methods the route table serves at its path.
//! An embedder keeps its own layer (README, "On the open internet").

use std::time::Duration;

use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_METHOD,
    HeaderValue, ORIGIN, VARY,
};
use http::{HeaderMap, Method, StatusCode};

use crate::response::{Response, empty};

/// The request headers a client of this API sends beyond the CORS-safelisted ones.
const ALLOW_HEADERS: HeaderValue = HeaderValue::from_static(
    "Content-Type, Authorization, If-Match, If-None-Match, Idempotency-Key, X-Request-Id",
);

/// The answer headers a script may read beyond the CORS-safelisted ones.
const EXPOSE_HEADERS: HeaderValue = HeaderValue::from_static(
    "ETag, Location, X-Request-Id, Retry-After, RateLimit, RateLimit-Policy, Idempotent-Replayed",
);

const VARY_ORIGIN: HeaderValue = HeaderValue::from_static("Origin");

/// Which origins may call the API from a browser.
#[derive(Debug, Clone)]
pub struct Cors {
    /// Exact origins (`https://app.example`), or `None` for any (`*`, no credentials).
    origins: Option<Vec<HeaderValue>>,
    max_age: HeaderValue,
}

/// An origin that cannot be one (`--cors-origin`).
#[derive(Debug, thiserror::Error)]
#[error("invalid CORS origin {0:?}: expected scheme://host[:port] with nothing after it, or *")]
pub struct InvalidOrigin(String);

impl Cors {
    /// For `origins`: each `scheme://host[:port]` as a browser sends it in `Origin`, or
    /// `*` for any origin (answers then say `*`, which browsers never pair with
    /// credentials). Preflights may be cached for `max_age`.
    pub fn new(
        origins: impl IntoIterator<Item = impl AsRef<str>>,
        max_age: Duration,
    ) -> Result<Self, InvalidOrigin> {
        let mut list = Vec::new();
        let mut any = false;
        for origin in origins {
            let origin = origin.as_ref().trim();
            if origin == "*" {
                any = true;
                continue;
            }
            let origin = origin.strip_suffix('/').unwrap_or(origin);
            let invalid = || InvalidOrigin(origin.to_owned());
            let (scheme, host) = origin.split_once("://").ok_or_else(invalid)?;
            let valid = !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                && !host.is_empty()
                && !host.contains(['/', '?', '#', '@', ' ']);
            if !valid {
                return Err(invalid());
            }
            // Browsers serialise scheme and host in lower case.
            let value =
                HeaderValue::from_str(&origin.to_ascii_lowercase()).map_err(|_| invalid())?;
            list.push(value);
        }
        Ok(Self {
            origins: (!any).then_some(list),
            max_age: HeaderValue::from(max_age.as_secs()),
        })
    }

    /// The `Access-Control-Allow-Origin` for `request`'s `Origin`, if it is allowed.
    pub(crate) fn allowed(&self, request: &HeaderMap) -> Option<HeaderValue> {
        let origin = request.get(ORIGIN)?;
        match &self.origins {
            None => Some(HeaderValue::from_static("*")),
            Some(list) => list.contains(origin).then(|| origin.clone()),
        }
    }

    /// The answer to a preflight from an allowed origin for a path whose routes serve
    /// `methods`; `None` if `request` is no preflight, or its origin is not allowed.
    pub(crate) fn preflight(
        &self,
        method: &Method,
        request: &HeaderMap,
        methods: impl FnOnce() -> Option<HeaderValue>,
    ) -> Option<Response> {
        if method != Method::OPTIONS || !request.contains_key(ACCESS_CONTROL_REQUEST_METHOD) {
            return None;
        }
        let origin = self.allowed(request)?;
        let methods = methods()?;
        let mut response = empty(StatusCode::NO_CONTENT);
        let headers = response.headers_mut();
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(ACCESS_CONTROL_ALLOW_METHODS, methods);
        headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, ALLOW_HEADERS);
        headers.insert(ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        headers.append(VARY, VARY_ORIGIN);
        headers.append(
            VARY,
            HeaderValue::from_static(
                "Access-Control-Request-Method, Access-Control-Request-Headers",
            ),
        );
        Some(response)
    }

    /// Marks an answer to a request from `origin` (as [`allowed`](Self::allowed) said):
    /// readable by that origin's script, with the fields it may read; `Vary: Origin` on
    /// every answer (the fields depend on it).
    pub(crate) fn expose(origin: Option<HeaderValue>, response: &mut Response) {
        let headers = response.headers_mut();
        headers.append(VARY, VARY_ORIGIN);
        if let Some(origin) = origin {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            headers.insert(ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSE_HEADERS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(origin: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, HeaderValue::from_str(origin).unwrap());
        headers.insert(
            ACCESS_CONTROL_REQUEST_METHOD,
            HeaderValue::from_static("PUT"),
        );
        headers
    }

    #[test]
    fn origins_are_exact_and_checked() {
        let cors = Cors::new(
            ["https://App.example/", "http://localhost:3000"],
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(
            cors.allowed(&request("https://app.example")).unwrap(),
            "https://app.example"
        );
        assert!(cors.allowed(&request("http://localhost:3000")).is_some());
        assert!(cors.allowed(&request("https://app.example.evil")).is_none());
        assert!(cors.allowed(&request("http://app.example")).is_none());
        assert!(cors.allowed(&request("null")).is_none());
        assert!(cors.allowed(&HeaderMap::new()).is_none());
        for bad in [
            "app.example",
            "https://",
            "https://a.example/path",
            "://x",
            "https://a b",
        ] {
            assert!(Cors::new([bad], Duration::ZERO).is_err(), "{bad}");
        }
        let any = Cors::new(["*"], Duration::ZERO).unwrap();
        assert_eq!(any.allowed(&request("https://x.example")).unwrap(), "*");
    }

    #[test]
    fn only_real_preflights_from_allowed_origins_are_answered() {
        let cors = Cors::new(["https://app.example"], Duration::from_secs(600)).unwrap();
        let methods = || Some(HeaderValue::from_static("GET, HEAD, OPTIONS, PUT"));
        let answer = cors
            .preflight(&Method::OPTIONS, &request("https://app.example"), methods)
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT);
        let header = |name| answer.headers().get(name).unwrap().to_str().unwrap();
        assert_eq!(
            header(ACCESS_CONTROL_ALLOW_METHODS),
            "GET, HEAD, OPTIONS, PUT"
        );
        assert_eq!(header(ACCESS_CONTROL_MAX_AGE), "600");
        assert!(header(ACCESS_CONTROL_ALLOW_HEADERS).contains("Idempotency-Key"));
        let other = request("https://other.example");
        assert!(cors.preflight(&Method::OPTIONS, &other, methods).is_none());
        let mut plain = request("https://app.example");
        plain.remove(ACCESS_CONTROL_REQUEST_METHOD);
        assert!(cors.preflight(&Method::OPTIONS, &plain, methods).is_none());
        let allowed = request("https://app.example");
        assert!(cors.preflight(&Method::GET, &allowed, methods).is_none());
        assert!(
            cors.preflight(&Method::OPTIONS, &allowed, || None)
                .is_none()
        );
    }
}
