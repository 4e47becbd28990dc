//! The fields every answer of the API is given as it leaves: `X-Request-Id`, and `Date`
//! from the configured clock (RFC 9110 §6.6.1: an origin server with a clock sends one).
//! A kept answer (the cache's, the ping's) holds a slot for each, which its copies fill:
//! empty, but for the extended ping's `Date`, which names its body's second.
//!
//! The slots are about cost as much as order: a copy of a kept answer has a header map
//! no larger than its fields, and hyper, which adds `Date` when it is missing, grew it
//! for every HTTP/2 answer ("HTTP/2" in BENCHMARKS.md).

use std::cell::RefCell;

use bytes::Bytes;
use chrono::DateTime;
use http::header::{DATE, HeaderValue};
use http::{HeaderMap, Response};

use crate::request_id::{REQUEST_ID, RequestId};

/// Puts the empty slots [`stamp`] fills first among `headers`, where `stamp` finds them
/// at once, and leaves the index room for one field more: a copy (whose list of fields
/// has no room to spare) then takes its `Date`, and a server's check for a field through
/// an entry (hyper's for `Content-Length`, which reserves one), without growing. A field
/// added to a copy, as compression's `Content-Encoding` is, still grows it. An answer of
/// one `second` (the extended ping's) has its `Date` filled instead, which copies keep.
pub(crate) fn keep_slots(headers: &mut HeaderMap, second: Option<i64>) {
    let mut slotted = HeaderMap::with_capacity(headers.len() + 3);
    let date = second.and_then(http_date);
    slotted.insert(DATE, date.unwrap_or(HeaderValue::from_static("")));
    slotted.insert(REQUEST_ID, HeaderValue::from_static(""));
    slotted.extend(std::mem::take(headers));
    *headers = slotted;
}

/// Sets `X-Request-Id` to `id`, and an empty or missing `Date` to the second `clock`
/// gives (since the Unix epoch); a `Date` the answer carries is kept (the extended ping's,
/// the second its body names), and the clock is then not read. A kept answer's copy has
/// both slots first: found at once, where hashing a name to insert it costs several times
/// more. (The id moves in: a generated id's first clone would allocate.)
pub(crate) fn stamp(response: &mut Response<Bytes>, id: RequestId, clock: impl FnOnce() -> i64) {
    let headers = response.headers_mut();
    let mut id = Some(id.into_header_value());
    let mut clock = Some(clock);
    let mut undated = false;
    for (name, value) in headers.iter_mut() {
        if *name == REQUEST_ID {
            if let Some(id) = id.take() {
                *value = id;
            }
        } else if *name == DATE
            && let Some(clock) = clock.take()
            && value.is_empty()
        {
            match http_date(clock()) {
                Some(date) => *value = date,
                None => undated = true,
            }
        }
        if id.is_none() && clock.is_none() {
            break;
        }
    }
    if let Some(id) = id {
        headers.insert(REQUEST_ID, id);
    }
    if let Some(date) = clock.and_then(|clock| http_date(clock())) {
        headers.insert(DATE, date);
    } else if undated {
        headers.remove(DATE);
    }
}

/// `Date`'s value for `second`, in the IMF-fixdate form (RFC 9110 §5.6.7): formatted once
/// per second and thread, shared after that. `None` for a second chrono cannot place.
fn http_date(second: i64) -> Option<HeaderValue> {
    thread_local! {
        static LAST: RefCell<Option<(i64, HeaderValue)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| {
        if let Some((at, value)) = last
            && *at == second
        {
            return Some(value.clone());
        }
        let date = DateTime::from_timestamp(second, 0)?;
        let text = date.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        // Letters, digits, commas, colons and spaces: always a valid field value.
        let value = HeaderValue::from_maybe_shared(Bytes::from(text)).ok()?;
        *last = Some((second, value.clone()));
        Some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_imf_fixdates() {
        let date = |second| http_date(second).expect("a date");
        assert_eq!(date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(i64::MAX), None);
    }

    #[test]
    fn stamping_fills_the_slots_without_growing_the_map() {
        let mut kept = Response::new(Bytes::new());
        // The ping's fields: with both slots, as many as a map of 8 index places takes,
        // where hyper's `Content-Length` entry would then grow it.
        for name in ["content-type", "vary", "content-length", "cache-control"] {
            kept.headers_mut().insert(
                http::HeaderName::from_static(name),
                HeaderValue::from_static("x"),
            );
        }
        keep_slots(kept.headers_mut(), None);
        let mut copy = Response::new(Bytes::new());
        *copy.headers_mut() = kept.headers().clone();
        let room = copy.headers().capacity();
        stamp(&mut copy, RequestId::from_headers(&HeaderMap::new()), || 0);
        let _ = copy.headers_mut().entry(http::header::CONTENT_LENGTH);
        assert_eq!(copy.headers().capacity(), room);
        assert_eq!(copy.headers().len(), 6);
        assert_eq!(copy.headers()[DATE], "Thu, 01 Jan 1970 00:00:00 GMT");
        assert!(!copy.headers()[REQUEST_ID].is_empty());
        assert_eq!(kept.headers()[DATE], "");
    }

    #[test]
    fn a_second_without_a_date_leaves_date_out() {
        let unplaceable = || i64::MAX;
        let mut kept = Response::new(Bytes::new());
        keep_slots(kept.headers_mut(), None);
        stamp(&mut kept, RequestId::generate(), unplaceable);
        let mut bare = Response::new(Bytes::new());
        stamp(&mut bare, RequestId::generate(), unplaceable);
        for answer in [kept, bare] {
            assert!(!answer.headers().contains_key(DATE));
            assert!(!answer.headers()[REQUEST_ID].is_empty());
        }
    }

    #[test]
    fn a_dated_answer_keeps_its_date_and_reads_no_clock() {
        let mut kept = Response::new(Bytes::new());
        keep_slots(kept.headers_mut(), Some(784_111_777));
        let mut copy = Response::new(Bytes::new());
        *copy.headers_mut() = kept.headers().clone();
        stamp(&mut copy, RequestId::generate(), || {
            panic!("the clock is read")
        });
        assert_eq!(copy.headers()[DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(copy.headers().get_all(DATE).iter().count(), 1);
        assert!(!copy.headers()[REQUEST_ID].is_empty());
        // Without a slot of its own, an answer is dated by the clock.
        let mut bare = Response::new(Bytes::new());
        stamp(&mut bare, RequestId::generate(), || 0);
        assert_eq!(bare.headers()[DATE], "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
