//! RFC 9457 problem details: what the API answers when a request fails.

use std::borrow::Cow;

use http::StatusCode;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::route::Allow;
use crate::store::StoreError;

/// Messages per field or parameter, in the order they were found; one message each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FieldErrors(Vec<(&'static str, String)>);

impl FieldErrors {
    pub(crate) fn add(&mut self, field: &'static str, message: impl Into<String>) {
        self.0.push((field, message.into()));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().map(|(field, _)| *field)
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

/// A failed request: status, the client-facing detail, and optional extras.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) detail: Cow<'static, str>,
    pub(crate) errors: Option<FieldErrors>,
    pub(crate) allow: Option<Allow>,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            detail: detail.into(),
            errors: None,
            allow: None,
        }
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
    }

    pub(crate) fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error")
    }

    pub(crate) fn method_not_allowed(allow: Allow) -> Self {
        Self {
            allow: Some(allow),
            ..Self::new(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed")
        }
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

impl From<StoreError> for Problem {
    /// Logs the store's own message and answers without it.
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) => {
                tracing::warn!(error = %error, "store unavailable");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "Service unavailable")
            }
            StoreError::AuthorNotFound(_) => {
                let mut errors = FieldErrors::default();
                errors.add("author_id", crate::validate::AUTHOR_INVALID);
                Self::invalid(errors)
            }
            StoreError::Other(_) => {
                tracing::error!(error = %error, "store failure");
                Self::internal()
            }
        }
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
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a FieldErrors>,
}

impl<'a> From<&'a Problem> for ProblemBody<'a> {
    fn from(problem: &'a Problem) -> Self {
        Self {
            kind: "about:blank",
            title: reason(problem.status),
            status: problem.status.as_u16(),
            detail: &problem.detail,
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
