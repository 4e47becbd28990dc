//! RFC 9457 problem details: what the API answers when a request fails.

use std::borrow::Cow;
use std::sync::Arc;

use http::StatusCode;
use http::header::{ALLOW, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::request_id::RequestId;
use crate::store::StoreError;

/// 422's message when a write names an author that does not exist.
pub(crate) const AUTHOR_INVALID: &str = "The selected author id is invalid.";

/// Messages per field or parameter, in the order they were found; one message each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FieldErrors(Vec<(Cow<'static, str>, String)>);

impl FieldErrors {
    /// A message for `field` (a body field, or a query parameter's decoded name).
    pub(crate) fn add(&mut self, field: impl Into<Cow<'static, str>>, message: impl Into<String>) {
        self.0.push((field.into(), message.into()));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn fields(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.iter().map(|(field, _)| field.as_ref())
    }
}

impl Serialize for FieldErrors {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct One<'a>(&'a str);
        impl Serialize for One<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(1))?;
                seq.serialize_element(self.0)?;
                seq.end()
            }
        }
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (field, message) in &self.0 {
            map.serialize_entry(field, &One(message))?;
        }
        map.end()
    }
}

/// A failed request: status, the client-facing detail, headers the answer carries
/// (`Allow`, `Retry-After` …), and the store failure behind it, which is logged once
/// where the request is answered and never shown to the client.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) detail: Cow<'static, str>,
    pub(crate) errors: Option<FieldErrors>,
    /// Headers the answer carries (few, so a list, which keeps `Result<_, Problem>` small).
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) cause: Option<Arc<StoreError>>,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            detail: detail.into(),
            errors: None,
            headers: Vec::new(),
            cause: None,
        }
    }

    /// The same problem, answered with this header too.
    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub(crate) fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not found")
    }

    pub(crate) fn book_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Book not found")
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "A valid bearer token is required to write.",
        )
        .with_header(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
    }

    /// 503: the store is unreachable or the server is at capacity; retry in a second.
    pub(crate) fn unavailable() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "Service unavailable")
            .with_header(RETRY_AFTER, HeaderValue::from_static("1"))
    }

    pub(crate) fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error")
    }

    /// 405, with the `Allow` value of the methods the path serves.
    pub(crate) fn method_not_allowed(allow: HeaderValue) -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed").with_header(ALLOW, allow)
    }

    pub(crate) fn not_acceptable() -> Self {
        Self::new(StatusCode::NOT_ACCEPTABLE, "Not acceptable")
    }

    pub(crate) fn bad_body(detail: &'static str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    pub(crate) fn too_large() -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "Payload too large")
    }

    pub(crate) fn unsupported_media_type() -> Self {
        Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Unsupported media type")
    }

    /// 400 for bad query parameters; `errors` names each one.
    pub(crate) fn bad_query(errors: FieldErrors) -> Self {
        let names: Vec<_> = errors.fields().collect();
        let detail = match names.as_slice() {
            [one] => format!("Invalid query parameter: {one}."),
            many => format!("Invalid query parameters: {}.", many.join(", ")),
        };
        Self {
            errors: Some(errors),
            ..Self::new(StatusCode::BAD_REQUEST, detail)
        }
    }

    /// 412: `If-Match` names none of the book's current tags; `etag` is the current one.
    pub(crate) fn precondition_failed(etag: Option<HeaderValue>) -> Self {
        let problem = Self::new(StatusCode::PRECONDITION_FAILED, "Precondition failed");
        match etag {
            Some(etag) => problem.with_header(http::header::ETAG, etag),
            None => problem,
        }
    }

    /// 428: writes must carry `If-Match` here.
    pub(crate) fn precondition_required() -> Self {
        Self::new(StatusCode::PRECONDITION_REQUIRED, "Precondition required")
    }

    /// 400: an `Idempotency-Key` that is not 1 to 255 visible ASCII characters.
    pub(crate) fn bad_idempotency_key() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "Invalid Idempotency-Key header: 1 to 255 visible ASCII characters, \
             as a token or a quoted string.",
        )
    }

    /// 422: the key was used by a different request.
    pub(crate) fn idempotency_key_reused() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Idempotency key reused with a different request",
        )
    }

    /// 409: the request that used the key first is still being processed.
    pub(crate) fn idempotency_key_in_progress() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "Request with this idempotency key is in progress",
        )
        .with_header(RETRY_AFTER, HeaderValue::from_static("1"))
    }

    /// 501: the store cannot check `If-Match` and write in one atomic step (it lacks the
    /// conditional writes tier), and two steps could lose an update.
    pub(crate) fn if_match_unsupported() -> Self {
        Self::new(
            StatusCode::NOT_IMPLEMENTED,
            "This server cannot honour If-Match: its store has no atomic conditional \
             writes. Send the write without If-Match.",
        )
    }

    /// 501: a list with `filter[…]` or `sort` from a store that lacks the list queries
    /// tier (it lists every book by id only).
    pub(crate) fn list_queries_unsupported() -> Self {
        Self::new(
            StatusCode::NOT_IMPLEMENTED,
            "This server cannot filter or sort the list: its store lists every book by id. \
             Ask without filter[...] and sort.",
        )
    }

    /// 501: the store cannot keep idempotency keys with their books (it lacks the
    /// idempotent creates tier), so a retry could create a second book.
    pub(crate) fn idempotency_unsupported() -> Self {
        Self::new(
            StatusCode::NOT_IMPLEMENTED,
            "This server cannot honour Idempotency-Key: its store keeps no keys. \
             Send the create without it.",
        )
    }

    pub(crate) fn invalid(errors: FieldErrors) -> Self {
        Self {
            errors: Some(errors),
            ..Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "The given data was invalid.",
            )
        }
    }
}

impl Problem {
    /// 422 on `author_id` alone: the author does not exist.
    pub(crate) fn author_invalid() -> Self {
        let mut errors = FieldErrors::default();
        errors.add("author_id", AUTHOR_INVALID);
        Self::invalid(errors)
    }

    /// A store failure, answered without the store's own message, which travels along
    /// as the cause.
    pub(crate) fn from_store(error: Arc<StoreError>) -> Self {
        let problem = match &*error {
            StoreError::Unavailable(_) => Self::unavailable(),
            StoreError::AuthorNotFound(_) => return Self::author_invalid(),
            StoreError::Other(_) => Self::internal(),
        };
        Self {
            cause: Some(error),
            ..problem
        }
    }
}

impl From<StoreError> for Problem {
    fn from(error: StoreError) -> Self {
        Self::from_store(Arc::new(error))
    }
}

impl From<Arc<StoreError>> for Problem {
    fn from(error: Arc<StoreError>) -> Self {
        Self::from_store(error)
    }
}

/// The serialised problem body.
#[derive(Serialize)]
pub(crate) struct ProblemBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: &'a str,
    /// `urn:request:<id>`: the request id a user can quote.
    instance: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a FieldErrors>,
}

impl<'a> ProblemBody<'a> {
    pub(crate) fn new(problem: &'a Problem, request_id: &RequestId) -> Self {
        Self {
            kind: "about:blank",
            title: reason(problem.status),
            status: problem.status.as_u16(),
            detail: &problem.detail,
            instance: format!("urn:request:{request_id}"),
            errors: problem.errors.as_ref(),
        }
    }
}

/// RFC 9110 reason phrases (http's own says "Unprocessable Entity" for 422).
fn reason(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNPROCESSABLE_ENTITY => "Unprocessable Content",
        StatusCode::PAYLOAD_TOO_LARGE => "Content Too Large",
        other => other.canonical_reason().unwrap_or("Error"),
    }
}

/// An error and its sources on one line, `: `-separated (for logs):
/// `format!("{}", ErrorChain(&error))`.
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    /// Each cause once: a cause whose words its wrapper already said (a wrapper that
    /// prints its source, a transparent one) is left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut said = self.0.to_string();
        f.write_str(&said)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            let words = cause.to_string();
            if !said.contains(&words) {
                write!(f, ": {words}")?;
            }
            said = words;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorChain;

    /// An error that says `words`, caused by `source`; `repeats` when its words end with
    /// its source's (as `format!("…: {source}")` wrappers do).
    #[derive(Debug)]
    struct Layer(String, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    fn chain(layers: &[&str]) -> Layer {
        layers
            .iter()
            .rev()
            .fold(None, |source, words| {
                Some(Layer(words.to_string(), source.map(Box::new)))
            })
            .unwrap()
    }

    #[test]
    fn each_cause_is_said_once() {
        let plain = chain(&["store unavailable", "pool timed out"]);
        assert_eq!(
            ErrorChain(&plain).to_string(),
            "store unavailable: pool timed out"
        );
        // A transparent wrapper, and one that prints its source itself.
        let repeated = chain(&[
            "store unavailable",
            "no server answers",
            "no server answers",
            "connect: connection refused",
            "connection refused",
        ]);
        assert_eq!(
            ErrorChain(&repeated).to_string(),
            "store unavailable: no server answers: connect: connection refused"
        );
    }
}
