//! The fields every answer of the API gets last: `X-Request-Id`, and `Date` from the
//! configured clock (RFC 9110 §6.6.1: an origin server with a clock sends one). A kept
//! answer (the cache's, the ping's) holds an empty slot for each, which its copies fill.
//!
//! The slots are about cost as much as order: a copy of a kept answer has a header map
//! no larger than its fields, and a server that added `Date` to it (hyper does when it is
//! missing) grew the map per answer: 4–6% of an HTTP/2 ping's CPU
//! ("HTTP/2" in BENCHMARKS.md).

use std::cell::RefCell;

use bytes::Bytes;
use chrono::DateTime;
use http::header::{DATE, HeaderValue};
use http::{HeaderMap, Response};

use crate::request_id::{REQUEST_ID, RequestId};

/// Puts the empty slots [`stamp`] fills first among `headers`, where `stamp` finds them
/// at once, and leaves room for one field more, so that neither `stamp` nor a server's
/// own check for a field (hyper asks for `Content-Length` through an entry, which
/// reserves one) grows a copy's map.
pub(crate) fn keep_slots(headers: &mut HeaderMap) {
    let mut slotted = HeaderMap::with_capacity(headers.len() + 3);
    slotted.insert(DATE, HeaderValue::from_static(""));
    slotted.insert(REQUEST_ID, HeaderValue::from_static(""));
    slotted.extend(std::mem::take(headers));
    *headers = slotted;
}

/// Sets `X-Request-Id` to `id` and `Date` to `second` (since the Unix epoch). A kept
/// answer's copy has their slots first: found at once, where hashing a name to insert
/// it costs several times more. (The id moves in: a generated id's first clone would
/// allocate.)
pub(crate) fn stamp(response: &mut Response<Bytes>, id: RequestId, second: i64) {
    let headers = response.headers_mut();
    let mut id = Some(id.into_header_value());
    let mut date = Some(http_date(second));
    for (name, slot) in headers.iter_mut() {
        let value = if *name == DATE {
            date.take()
        } else if *name == REQUEST_ID {
            id.take()
        } else {
            None
        };
        if let Some(value) = value {
            *slot = value;
        }
        if id.is_none() && date.is_none() {
            return;
        }
    }
    if let Some(id) = id {
        headers.insert(REQUEST_ID, id);
    }
    if let Some(date) = date {
        headers.insert(DATE, date);
    }
}

/// `Date`'s value for `second`, in the IMF-fixdate form (RFC 9110 §5.6.7): formatted once
/// per second and thread, shared after that.
fn http_date(second: i64) -> HeaderValue {
    thread_local! {
        static LAST: RefCell<(i64, HeaderValue)> =
            const { RefCell::new((i64::MIN, HeaderValue::from_static(""))) };
    }
    LAST.with_borrow_mut(|(at, value)| {
        if *at != second {
            let date = DateTime::from_timestamp(second, 0).unwrap_or_default();
            let text = date.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
            // Letters, digits, commas, colons and spaces: always a valid field value.
            if let Ok(formatted) = HeaderValue::from_maybe_shared(Bytes::from(text)) {
                (*at, *value) = (second, formatted);
            }
        }
        value.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_imf_fixdates() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn stamping_fills_the_slots_without_growing_the_map() {
        let mut kept = Response::new(Bytes::new());
        // The ping's fields: with both slots, the six a new map has room for.
        for name in ["content-type", "vary", "content-length", "cache-control"] {
            kept.headers_mut().insert(
                http::HeaderName::from_static(name),
                HeaderValue::from_static("x"),
            );
        }
        keep_slots(kept.headers_mut());
        let mut copy = Response::new(Bytes::new());
        *copy.headers_mut() = kept.headers().clone();
        let room = copy.headers().capacity();
        stamp(&mut copy, RequestId::from_headers(&HeaderMap::new()), 0);
        let _ = copy.headers_mut().entry(http::header::CONTENT_LENGTH);
        assert_eq!(copy.headers().capacity(), room);
        assert_eq!(copy.headers().len(), 6);
        assert_eq!(copy.headers()[DATE], "Thu, 01 Jan 1970 00:00:00 GMT");
        assert!(!copy.headers()[REQUEST_ID].is_empty());
        assert_eq!(kept.headers()[DATE], "");
    }
}
