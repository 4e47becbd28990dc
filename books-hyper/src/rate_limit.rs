//! Per-client rate limits: each client's requests go through governor's GCRA (a token
//! bucket that refills continuously), keyed by the client's address.
//!
//! The client is the peer address, or, when the peer is a trusted proxy
//! (`--trusted-proxies`), the right-most `X-Forwarded-For` address that is not one:
//! every hop the request passed through from there on is ours, so that address is the
//! one a trusted proxy saw connect. `X-Forwarded-For` from any other peer is ignored.
//! IPv6 clients are counted by their /64 (one host usually holds a whole /64, so
//! counting single addresses would let it pick a fresh one per request).
//!
//! Memory: a client's entry lives while its bucket is not full again, at most
//! `burst / rate` seconds after its last request, and is swept once a second, so the
//! table holds the clients seen in about the last `burst / rate + 1` seconds, tens of
//! bytes each (`scripts/load.py --edge`: 100,000 distinct clients, 52 bytes each).

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http::HeaderMap;
use http::header::HeaderValue;
use ipnet::IpNet;

/// `RateLimit` and `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT: &str = "ratelimit";
/// See [`RATELIMIT`].
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";

/// How fast each client may send requests.
#[derive(Debug, Clone)]
pub struct RateLimit {
    /// Requests per second a client may keep up.
    pub per_second: NonZeroU32,
    /// Requests a client may send at once after a pause (the bucket's size).
    pub burst: NonZeroU32,
    /// Proxies whose `X-Forwarded-For` names the client (nothing trusted by default).
    pub trusted_proxies: Vec<IpNet>,
}

impl RateLimit {
    /// `per_second` requests a second per client, with bursts of as many.
    pub fn per_second(per_second: NonZeroU32) -> Self {
        Self {
            per_second,
            burst: per_second,
            trusted_proxies: Vec::new(),
        }
    }
}

/// What the limiter says of one request.
pub(crate) enum Verdict {
    /// Let through: the `RateLimit` field to send.
    Allowed(HeaderValue),
    /// Refused: the `RateLimit` field, and the seconds until a request would pass.
    Limited(HeaderValue, u64),
}

/// The limiter the connection loop asks.
pub(crate) struct Limiter {
    limiter: DefaultKeyedRateLimiter<IpAddr, StateInformationMiddleware>,
    clock: DefaultClock,
    policy: HeaderValue,
    per_second: u32,
    burst: u32,
    trusted: Vec<IpNet>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("per_second", &self.per_second)
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A limiter for `limit`; [`sweep`](Self::sweep) forgets its idle clients.
    pub(crate) fn new(limit: &RateLimit) -> Self {
        let quota = Quota::per_second(limit.per_second).allow_burst(limit.burst);
        Self {
            limiter: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            clock: DefaultClock::default(),
            policy: HeaderValue::try_from(format!("\"client\";q={};w=1", limit.per_second))
                .expect("digits are header-safe"),
            per_second: limit.per_second.get(),
            burst: limit.burst.get(),
            trusted: limit.trusted_proxies.clone(),
        }
    }

    /// Forgets the clients whose allowance is full again (the server calls it once a
    /// second), so memory follows the clients of the last moments, not of all time.
    pub(crate) fn sweep(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }

    /// The `RateLimit-Policy` field.
    pub(crate) fn policy(&self) -> &HeaderValue {
        &self.policy
    }

    /// Clients with an entry now.
    #[cfg(test)]
    pub(crate) fn clients(&self) -> usize {
        self.limiter.len()
    }

    /// Counts one request from `client`.
    pub(crate) fn check(&self, client: IpAddr) -> Verdict {
        match self.limiter.check_key(&client) {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                // Until the bucket is full again.
                let reset = (self.burst - remaining.min(self.burst)).div_ceil(self.per_second);
                Verdict::Allowed(field(remaining, reset))
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let seconds = seconds.max(1);
                Verdict::Limited(field(0, seconds as u32), seconds)
            }
        }
    }

    /// The client a request from `peer` with `headers` counts against (see the
    /// module's doc).
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let trusted = |address: &IpAddr| self.trusted.iter().any(|net| net.contains(address));
        let mut client = peer.to_canonical();
        if trusted(&client) {
            // Right to left: the last field line first, each from its end.
            let hops = headers
                .get_all("x-forwarded-for")
                .iter()
                .rev()
                .filter_map(|value| value.to_str().ok())
                .flat_map(|value| value.rsplit(','));
            for hop in hops {
                // An address that does not parse ends the walk: the hop before it (a
                // trusted proxy) is the client as far as anything can tell.
                let Some(address) = parse_hop(hop) else { break };
                client = address;
                if !trusted(&client) {
                    break;
                }
            }
        }
        match client {
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
            v4 => v4,
        }
    }
}

/// One `X-Forwarded-For` element: an address, perhaps with a port or in brackets.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| hop.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
        .map(|address: IpAddr| address.to_canonical())
}

/// `RateLimit: "client";r=…;t=…`.
fn field(remaining: u32, reset: u32) -> HeaderValue {
    HeaderValue::try_from(format!("\"client\";r={remaining};t={reset}"))
        .expect("digits are header-safe")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_second: u32, trusted: &[&str]) -> RateLimit {
        RateLimit {
            trusted_proxies: trusted.iter().map(|net| net.parse().unwrap()).collect(),
            ..RateLimit::per_second(NonZeroU32::new(per_second).unwrap())
        }
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        headers
    }

    #[tokio::test]
    async fn the_client_is_the_peer_unless_a_trusted_proxy_forwards() {
        let limiter = Limiter::new(&limit(5, &["10.0.0.0/8", "::1/128"]));
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let headers = forwarded("203.0.113.9, 198.51.100.7, 10.1.2.3");
        // An untrusted peer's header is ignored.
        assert_eq!(limiter.client(ip("192.0.2.1"), &headers), ip("192.0.2.1"));
        // A trusted peer: the right-most address that is not a trusted proxy.
        assert_eq!(limiter.client(ip("10.0.0.1"), &headers), ip("198.51.100.7"));
        assert_eq!(
            limiter.client(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        let garbage = forwarded("203.0.113.9, not-an-address, 10.9.9.9");
        assert_eq!(limiter.client(ip("10.0.0.1"), &garbage), ip("10.9.9.9"));
        let ported = forwarded("198.51.100.7:4711");
        assert_eq!(limiter.client(ip("10.0.0.1"), &ported), ip("198.51.100.7"));
        // IPv6 by /64; IPv4-mapped addresses as IPv4.
        let v6 = limiter.client(ip("2001:db8:1:2:3:4:5:6"), &HeaderMap::new());
        assert_eq!(v6, ip("2001:db8:1:2::"));
        assert_eq!(
            limiter.client(ip("::ffff:192.0.2.1"), &HeaderMap::new()),
            ip("192.0.2.1")
        );
        let bracketed = forwarded("[2001:db8::1]:443");
        assert_eq!(limiter.client(ip("::1"), &bracketed), ip("2001:db8::"));
    }

    #[tokio::test]
    async fn a_client_past_its_burst_waits_others_do_not() {
        let limiter = Limiter::new(&limit(5, &[]));
        let (one, two) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        for left in (0..5).rev() {
            let Verdict::Allowed(field) = limiter.check(one) else {
                panic!("allowed")
            };
            assert!(
                field
                    .to_str()
                    .unwrap()
                    .starts_with(&format!("\"client\";r={left};"))
            );
        }
        let Verdict::Limited(field, retry) = limiter.check(one) else {
            panic!("limited")
        };
        assert_eq!(field, "\"client\";r=0;t=1");
        assert_eq!(retry, 1);
        assert!(matches!(limiter.check(two), Verdict::Allowed(_)));
        assert_eq!(limiter.policy(), "\"client\";q=5;w=1");
        assert_eq!(limiter.clients(), 2);
    }
}
