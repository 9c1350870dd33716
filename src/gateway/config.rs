//! The gateway's settings ([`Config`]) and its upstreams ([`Upstream`]).

use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use std::fmt;
use std::time::Duration;

/// How a request's upstream is chosen among those not ejected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Balance {
    /// Each in turn.
    #[default]
    RoundRobin,
    /// The one with the fewest requests in flight (a response counts until its body has
    /// been read or dropped); ties go in turn.
    LeastOutstanding,
}

/// Limits, timeouts and choices of a [`Gateway`](super::Gateway). Start from
/// `Config::default()` and change what you need with the `with_*` setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// How an upstream is chosen.
    pub balance: Balance,
    /// Time allowed to resolve and connect to an upstream; past it: 504 (or the next
    /// upstream, as nothing was sent).
    pub connect_timeout: Option<Duration>,
    /// Time allowed from the request's start until the upstream's response head (the
    /// upload included); past it: 504.
    pub first_byte_timeout: Option<Duration>,
    /// Time allowed between two reads of an upstream's response body; past it the
    /// response is broken off (the client sees a reset, never a short body as a whole
    /// one).
    pub idle_timeout: Option<Duration>,
    /// Consecutive failures (connect, timeout, a malformed or cut-off response head) that
    /// eject an upstream.
    pub max_fails: u32,
    /// How long an ejected upstream gets no requests (unless every upstream is ejected).
    pub eject_for: Duration,
    /// Further upstreams a request may go to when one failed before anything was sent
    /// (a connect failure: any method), or, for an idempotent method whose body was not
    /// read yet, closed before answering.
    pub retries: usize,
    /// Passes the client's `Host` on (true), or sends the upstream's authority (false).
    pub preserve_host: bool,
    /// Adds a `Forwarded` element (RFC 7239: `for`, `proto`, `host`).
    pub forwarded: bool,
    /// Appends the client's address to `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// Sets `X-Forwarded-Proto` to the client's scheme.
    pub x_forwarded_proto: bool,
    /// Adds `Via` to requests and responses (RFC 9110 §7.6.3).
    pub via: bool,
    /// Passes HTTP/1.1 `Upgrade` requests (WebSocket) and WebSockets over HTTP/2 and
    /// HTTP/3 (extended CONNECT) through as byte tunnels, to every kind of upstream.
    pub upgrades: bool,
    /// Bytes buffered per direction of an upgraded tunnel (at least 1 KiB), and queued
    /// toward an HTTP/2 or HTTP/3 stream before writes wait for its window.
    pub tunnel_buffer: usize,
    /// An upgraded tunnel with no byte either way for this long is closed (a peer gone
    /// without a FIN would hold it forever).
    pub tunnel_idle_timeout: Option<Duration>,
    /// Largest upstream response head; a larger one is malformed (502).
    pub max_response_head: usize,
    /// Idle upstream connections kept per upstream. Room for as many as the gateway has
    /// requests in flight: one closed for want of room is connected again for a later
    /// request, a connect and a close (both ends' kernels) where reuse costs nothing; an
    /// idle one costs a socket and about 600 B, and `pool_idle_timeout` ends it.
    pub pool_max_idle: usize,
    /// How long an idle upstream connection is kept.
    pub pool_idle_timeout: Option<Duration>,
    /// The TLS config of `https://` and `h3://` upstreams (a private CA, a client
    /// certificate); `None`: the webpki roots.
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<crate::tls::rustls::ClientConfig>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            balance: Balance::RoundRobin,
            connect_timeout: Some(Duration::from_secs(5)),
            first_byte_timeout: Some(Duration::from_secs(60)),
            idle_timeout: Some(Duration::from_secs(60)),
            max_fails: 1,
            eject_for: Duration::from_secs(10),
            retries: 2,
            preserve_host: true,
            forwarded: false,
            x_forwarded_for: true,
            x_forwarded_proto: true,
            via: true,
            upgrades: true,
            tunnel_buffer: 16 * 1024,
            tunnel_idle_timeout: Some(Duration::from_secs(300)),
            max_response_head: 64 * 1024,
            pool_max_idle: 1024,
            pool_idle_timeout: Some(Duration::from_secs(90)),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

config_setters!(Config {
    set with_balance => balance: Balance,
    opt with_connect_timeout => connect_timeout: Duration,
    opt with_first_byte_timeout => first_byte_timeout: Duration,
    opt with_idle_timeout => idle_timeout: Duration,
    set with_max_fails => max_fails: u32,
    set with_eject_for => eject_for: Duration,
    set with_retries => retries: usize,
    set with_preserve_host => preserve_host: bool,
    set with_forwarded => forwarded: bool,
    set with_x_forwarded_for => x_forwarded_for: bool,
    set with_x_forwarded_proto => x_forwarded_proto: bool,
    set with_via => via: bool,
    set with_upgrades => upgrades: bool,
    set with_tunnel_buffer => tunnel_buffer: usize,
    opt with_tunnel_idle_timeout => tunnel_idle_timeout: Duration,
    set with_max_response_head => max_response_head: usize,
    set with_pool_max_idle => pool_max_idle: usize,
    opt with_pool_idle_timeout => pool_idle_timeout: Duration,
});

#[cfg(feature = "tls")]
config_setters!(Config {
    opt with_tls => tls: std::sync::Arc<crate::tls::rustls::ClientConfig>,
});

/// How the gateway speaks to an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speaks {
    /// `http://`: HTTP/1.1.
    Http1,
    /// `h2c://`: HTTP/2 without TLS, by prior knowledge.
    H2c,
    /// `https://`: TLS, HTTP/2 or HTTP/1.1 as ALPN picks.
    #[cfg(feature = "tls")]
    Https,
    /// `h3://`: HTTP/3 over QUIC, by prior knowledge.
    #[cfg(feature = "http3")]
    H3,
}

impl Speaks {
    fn scheme(self) -> &'static str {
        match self {
            Speaks::Http1 => "http",
            Speaks::H2c => "h2c",
            #[cfg(feature = "tls")]
            Speaks::Https => "https",
            #[cfg(feature = "http3")]
            Speaks::H3 => "h3",
        }
    }

    /// Whether it is spoken over TLS (the request's URI is `https://`).
    pub(crate) fn is_tls(self) -> bool {
        !matches!(self, Speaks::Http1 | Speaks::H2c)
    }
}

/// What [`Upstream::parse`] takes, in this build.
const SCHEMES: &str = if cfg!(feature = "http3") {
    "the scheme must be http://, h2c://, https:// or h3://"
} else if cfg!(feature = "tls") {
    "the scheme must be http://, h2c:// or https://"
} else {
    "the scheme must be http:// or h2c:// (https:// needs feature tls, h3:// http3)"
};

/// One upstream: `http://host:port` (HTTP/1.1), `h2c://host:port` (HTTP/2 by prior
/// knowledge), `https://host:port` (feature `tls`: HTTP/2 or HTTP/1.1 by ALPN) or
/// `h3://host:port` (feature `http3`: HTTP/3 by prior knowledge), with an optional path
/// prefix put in front of every request's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    authority: Authority,
    prefix: String,
    speaks: Speaks,
}

/// An upstream URI the gateway cannot use.
#[derive(Debug)]
pub struct InvalidUpstream(String);

impl fmt::Display for InvalidUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidUpstream {}

impl InvalidUpstream {
    pub(crate) fn none() -> InvalidUpstream {
        InvalidUpstream("a gateway needs at least one upstream".into())
    }
}

impl Upstream {
    /// Parses `scheme://host:port[/prefix]` (the schemes: see [`Upstream`]).
    pub fn parse(s: &str) -> Result<Upstream, InvalidUpstream> {
        let bad = |why: &str| InvalidUpstream(format!("upstream {s:?}: {why}"));
        let uri: Uri = s.trim().parse().map_err(|e| bad(&format!("{e}")))?;
        let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
        let speaks = match scheme.as_str() {
            "http" => Speaks::Http1,
            "h2c" => Speaks::H2c,
            #[cfg(feature = "tls")]
            "https" => Speaks::Https,
            #[cfg(feature = "http3")]
            "h3" => Speaks::H3,
            _ => return Err(bad(SCHEMES)),
        };
        let authority = uri.authority().cloned().ok_or_else(|| bad("no host"))?;
        if uri.query().is_some() {
            return Err(bad("a query cannot be a prefix"));
        }
        let prefix = uri.path().trim_end_matches('/').to_owned();
        Ok(Upstream {
            authority,
            prefix,
            speaks,
        })
    }

    pub(crate) fn speaks(&self) -> Speaks {
        self.speaks
    }

    pub(crate) fn authority(&self) -> &Authority {
        &self.authority
    }

    /// The URI a request for `path_and_query` (origin form) is sent to.
    pub(crate) fn uri(&self, path_and_query: &PathAndQuery) -> Result<Uri, http::Error> {
        // Without a prefix the request's own (shared) bytes go on: no copy.
        let pq = if self.prefix.is_empty() {
            path_and_query.clone()
        } else {
            PathAndQuery::try_from(format!("{}{path_and_query}", self.prefix))?
        };
        let scheme = if self.speaks.is_tls() {
            Scheme::HTTPS
        } else {
            Scheme::HTTP
        };
        Uri::builder()
            .scheme(scheme)
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.speaks.scheme();
        write!(f, "{scheme}://{}{}", self.authority, self.prefix)
    }
}

impl std::str::FromStr for Upstream {
    type Err = InvalidUpstream;
    fn from_str(s: &str) -> Result<Upstream, InvalidUpstream> {
        Upstream::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_parse_with_their_protocol_and_prefix() {
        let up = Upstream::parse("http://127.0.0.1:9000").unwrap();
        assert_eq!(up.speaks(), Speaks::Http1);
        let pq = PathAndQuery::from_static;
        assert_eq!(
            up.uri(&pq("/a?b=1")).unwrap(),
            "http://127.0.0.1:9000/a?b=1"
        );
        let up = Upstream::parse("h2c://h:81/api/").unwrap();
        assert_eq!(up.speaks(), Speaks::H2c);
        assert_eq!(up.uri(&pq("/x")).unwrap(), "http://h:81/api/x");
        assert_eq!(up.to_string(), "h2c://h:81/api");
        assert!(Upstream::parse("ftp://h/").is_err());
        assert!(Upstream::parse("/path").is_err());
        assert!(Upstream::parse("http://h/?q").is_err());
    }
}
