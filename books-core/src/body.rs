//! Reading a request body under the size limit and decoding its fields.

use std::collections::HashMap;
use std::convert::Infallible;

use bytes::Bytes;
use http::HeaderMap;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use mime::Mime;
use serde_json::error::Category;
use serde_json::value::RawValue;

use crate::form;
use crate::problem::Problem;

/// One input field as sent, before validation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Raw {
    Missing,
    /// A form value, multipart text field or JSON string.
    Text(String),
    /// A JSON number, as written (so an integer beyond 64 bits is still an integer).
    Number(String),
    /// A JSON boolean, array or object.
    Other,
}

/// The three fields the API reads; everything else is ignored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fields {
    pub(crate) title: Raw,
    pub(crate) author_id: Raw,
    pub(crate) year: Raw,
}

/// Reads the whole body, answering 413 as soon as it exceeds `limit` bytes
/// (at once when `Content-Length` says so) without buffering the rest.
pub(crate) async fn read<B>(headers: &HeaderMap, body: B, limit: usize) -> Result<Bytes, Problem>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        crate::metrics::rejected("body_limit");
        Err(Problem::too_large())
    };
    if declared.is_some_and(|len| len > limit as u64) {
        return too_large();
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => too_large(),
        Err(error) => {
            tracing::debug!(error = %error, "request body could not be read");
            Err(Problem::bad_body("The request body could not be read."))
        }
    }
}

/// Decodes the body by its `Content-Type` (none means a form).
pub(crate) async fn decode(headers: &HeaderMap, body: Bytes) -> Result<Fields, Problem> {
    let Some(content_type) = headers.get(CONTENT_TYPE) else {
        return decode_form(&body);
    };
    let mime: Mime = content_type
        .to_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(Problem::unsupported_media_type)?;
    match (mime.type_(), mime.subtype()) {
        (mime::APPLICATION, mime::WWW_FORM_URLENCODED) => decode_form(&body),
        (mime::APPLICATION, mime::JSON) => decode_json(&body),
        (mime::MULTIPART, mime::FORM_DATA) => decode_multipart(&mime, body).await,
        _ => Err(Problem::unsupported_media_type()),
    }
}

fn decode_form(body: &[u8]) -> Result<Fields, Problem> {
    let field = |name| match form::last_value(body, name) {
        Ok(value) => Ok(value.map_or(Raw::Missing, |text| Raw::Text(text.into_owned()))),
        Err(_) => Err(Problem::bad_body("The form body is not valid UTF-8.")),
    };
    Ok(Fields {
        title: field("title")?,
        author_id: field("author_id")?,
        year: field("year")?,
    })
}

fn decode_json(body: &[u8]) -> Result<Fields, Problem> {
    // Values stay raw: a number keeps its literal, and only strings are decoded.
    let mut object: HashMap<String, &RawValue> =
        serde_json::from_slice(body).map_err(|error| match error.classify() {
            Category::Data => Problem::bad_body("The JSON body must be an object."),
            _ => Problem::bad_body("The request body is not valid JSON."),
        })?;
    let mut field = |name| take_json(object.remove(name));
    Ok(Fields {
        title: field("title")?,
        author_id: field("author_id")?,
        year: field("year")?,
    })
}

fn take_json(value: Option<&RawValue>) -> Result<Raw, Problem> {
    let Some(value) = value else {
        return Ok(Raw::Missing);
    };
    let text = value.get();
    Ok(match text.as_bytes().first() {
        Some(b'n') => Raw::Missing,
        Some(b'"') => Raw::Text(
            serde_json::from_str(text)
                .map_err(|_| Problem::bad_body("The request body is not valid JSON."))?,
        ),
        Some(b'-' | b'0'..=b'9') => Raw::Number(text.to_owned()),
        _ => Raw::Other,
    })
}

async fn decode_multipart(mime: &Mime, body: Bytes) -> Result<Fields, Problem> {
    let malformed = || Problem::bad_body("The multipart body is malformed.");
    let boundary = mime.get_param(mime::BOUNDARY).ok_or_else(malformed)?;
    let stream = futures_util::stream::once(async move { Ok::<_, Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary.as_str());
    let mut fields = Fields {
        title: Raw::Missing,
        author_id: Raw::Missing,
        year: Raw::Missing,
    };
    while let Some(field) = multipart.next_field().await.map_err(|_| malformed())? {
        let slot = match field.name() {
            Some("title") => &mut fields.title,
            Some("author_id") => &mut fields.author_id,
            Some("year") => &mut fields.year,
            _ => continue,
        };
        let bytes = field.bytes().await.map_err(|_| malformed())?;
        let text = String::from_utf8(bytes.into())
            .map_err(|_| Problem::bad_body("A multipart field is not valid UTF-8."))?;
        *slot = Raw::Text(text);
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, content_type.parse().unwrap());
        headers
    }

    async fn decode_with(content_type: &str, body: &'static [u8]) -> Result<Fields, Problem> {
        decode(&headers(content_type), Bytes::from_static(body)).await
    }

    #[tokio::test]
    async fn multipart_text_fields() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nDune\r\n--XyZ\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--XyZ\r\nContent-Disposition: form-data; name=\"year\"\r\n\r\n2001\r\n--XyZ--\r\n";
        let fields = decode_with("multipart/form-data; boundary=XyZ", body)
            .await
            .unwrap();
        assert_eq!(fields.title, Raw::Text("Dune".into()));
        assert_eq!(fields.year, Raw::Text("2001".into()));
        assert_eq!(fields.author_id, Raw::Missing);
        let broken = decode_with("multipart/form-data; boundary=XyZ", b"--nope").await;
        assert_eq!(broken.unwrap_err().status, 400);
        let no_boundary = decode_with("multipart/form-data", b"").await;
        assert_eq!(no_boundary.unwrap_err().status, 400);
    }

    #[tokio::test]
    async fn json_and_types() {
        let fields = decode_with(
            "application/json; charset=utf-8",
            br#"{"title":null,"year":2001,"author_id":"3"}"#,
        )
        .await
        .unwrap();
        assert_eq!(fields.title, Raw::Missing);
        assert_eq!(fields.year, Raw::Number("2001".into()));
        assert_eq!(fields.author_id, Raw::Text("3".into()));
        assert_eq!(fields_status("application/json", b"[1]").await, 400);
        assert_eq!(fields_status("application/json", b"{").await, 400);
        assert_eq!(fields_status("text/plain", b"a=b").await, 415);
        assert_eq!(fields_status("no slash", b"a=b").await, 415);
    }

    async fn fields_status(content_type: &str, body: &'static [u8]) -> u16 {
        decode_with(content_type, body)
            .await
            .unwrap_err()
            .status
            .as_u16()
    }
}
