//! [`Builder`]: a client's settings, and the clients it builds.

#[cfg(feature = "http3")]
use super::http3;
use super::proxied::Proxied;
#[cfg(feature = "tls")]
use super::HttpsConnector;
use super::{Client, Connector, H1Options, H2Config, HttpConnector, IdlePool, Inner, Proxy};
use std::sync::Arc;
use std::time::Duration;

/// Settings of a [`Client`]; see [`Client::builder`].
#[derive(Clone, Debug)]
pub struct Builder {
    idle_timeout: Option<Duration>,
    max_idle_per_host: usize,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    max_body: Option<u64>,
    retry: bool,
    h1: H1Options,
    h2: H2Config,
    h2_prior_knowledge: bool,
    http1_only: bool,
    proxies: Vec<Proxy>,
    proxy_from_env: bool,
    #[cfg(feature = "tls")]
    tls: Option<Arc<crate::tls::rustls::ClientConfig>>,
    #[cfg(feature = "http3")]
    h3: http3::Options,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            idle_timeout: Some(Duration::from_secs(90)),
            max_idle_per_host: 64,
            connect_timeout: None,
            request_timeout: None,
            max_body: None,
            retry: true,
            h1: H1Options::default(),
            h2: H2Config::default(),
            h2_prior_knowledge: false,
            proxies: Vec::new(),
            proxy_from_env: false,
            http1_only: false,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "http3")]
            h3: http3::Options::default(),
        }
    }
}

impl Builder {
    /// How long an idle pooled connection is kept (default 90 s; `None`: until the server
    /// closes it). An HTTP/2 connection is idle while it has no streams.
    pub fn pool_idle_timeout(&mut self, t: impl Into<Option<Duration>>) -> &mut Self {
        self.idle_timeout = t.into();
        self
    }

    /// Idle connections kept per (scheme, authority) (default 64; 0 disables pooling).
    pub fn pool_max_idle_per_host(&mut self, n: usize) -> &mut Self {
        self.max_idle_per_host = n;
        self
    }

    /// Time allowed to resolve and connect (default: none).
    pub fn connect_timeout(&mut self, t: impl Into<Option<Duration>>) -> &mut Self {
        self.connect_timeout = t.into();
        self
    }

    /// Time allowed from the call until the response head has arrived, connecting
    /// included (default: none). Reading the body is not covered: it streams.
    pub fn request_timeout(&mut self, t: impl Into<Option<Duration>>) -> &mut Self {
        self.request_timeout = t.into();
        self
    }

    /// Largest response body accepted: a larger Content-Length fails the request, a longer
    /// stream fails the body (default: no limit).
    pub fn max_response_body_size(&mut self, n: impl Into<Option<u64>>) -> &mut Self {
        self.max_body = n.into();
        self
    }

    /// Whether requests that never reached the server (and idempotent ones whose reused
    /// connection closed before answering) are retried once on a fresh connection, when
    /// their body is not a consumed stream (default true).
    pub fn retry_canceled_requests(&mut self, on: bool) -> &mut Self {
        self.retry = on;
        self
    }

    /// Sends header names in Title-Case (default false).
    pub fn http1_title_case_headers(&mut self, on: bool) -> &mut Self {
        self.h1.title_case_headers = on;
        self
    }

    /// Most header fields accepted in a response (default 100); more fails the request
    /// with [`ErrorKind::Protocol`](super::ErrorKind::Protocol).
    pub fn http1_max_headers(&mut self, n: usize) -> &mut Self {
        self.h1.limits.max_headers = n;
        self
    }

    /// Largest response head accepted, in bytes (default 64 KiB); larger fails the
    /// request with [`ErrorKind::Protocol`](super::ErrorKind::Protocol).
    pub fn http1_max_head_size(&mut self, n: usize) -> &mut Self {
        self.h1.limits.max_head_bytes = n;
        self
    }

    /// Accepts obsolete multi-line (folded) response headers, joining the lines with
    /// spaces (default false: such a response is refused).
    pub fn http1_allow_obsolete_multiline_headers_in_responses(&mut self, on: bool) -> &mut Self {
        self.h1.limits.allow_obsolete_folding = on;
        self
    }

    /// Speaks HTTP/2 without TLS from the first byte ("prior knowledge", h2c) to `http`
    /// URIs: one connection per host carries every request, multiplexed (default false:
    /// HTTP/1.1). `https` picks its protocol by ALPN either way.
    pub fn http2_prior_knowledge(&mut self) -> &mut Self {
        self.h2_prior_knowledge = true;
        self
    }

    /// Only HTTP/1.1: ALPN offers `http/1.1` alone and prior knowledge is off (default
    /// false: `https` offers `h2` and `http/1.1`).
    pub fn http1_only(&mut self, on: bool) -> &mut Self {
        self.http1_only = on;
        self
    }

    /// HTTP/2: response body bytes one stream may have unread (SETTINGS_INITIAL_WINDOW_SIZE;
    /// default 1 MiB).
    pub fn http2_initial_stream_window_size(&mut self, n: u32) -> &mut Self {
        self.h2.initial_stream_window = n;
        self
    }

    /// HTTP/2: response body bytes all streams of a connection may have unread (default
    /// 4 MiB).
    pub fn http2_initial_connection_window_size(&mut self, n: u32) -> &mut Self {
        self.h2.initial_connection_window = n;
        self
    }

    /// HTTP/2: the largest frame the server may send (SETTINGS_MAX_FRAME_SIZE; default
    /// 16 KiB, at least 16 KiB).
    pub fn http2_max_frame_size(&mut self, n: u32) -> &mut Self {
        self.h2.max_frame_size = n;
        self
    }

    /// HTTP/2: the largest response head (SETTINGS_MAX_HEADER_LIST_SIZE; default 64 KiB);
    /// a larger one fails its request.
    pub fn http2_max_header_list_size(&mut self, n: u32) -> &mut Self {
        self.h2.max_header_list_size = n;
        self
    }

    /// HTTP/2: the HPACK table the server may use towards the client
    /// (SETTINGS_HEADER_TABLE_SIZE; default 4096).
    pub fn http2_header_table_size(&mut self, n: u32) -> &mut Self {
        self.h2.header_table_size = n;
        self
    }

    /// HTTP/2: streams opened at once before the server's SETTINGS say how many it takes
    /// (default 100); later requests wait for a stream to end.
    pub fn http2_initial_max_send_streams(&mut self, n: u32) -> &mut Self {
        self.h2.initial_max_concurrent_streams = n;
        self
    }

    /// HTTP/2: frames that do no work (PING, SETTINGS, empty DATA, ...) a server may send,
    /// less what responses earn, before the connection is closed (default 10 000).
    pub fn http2_max_idle_frames(&mut self, n: u32) -> &mut Self {
        self.h2.max_idle_frames = n;
        self
    }

    /// HTTP/2: sends a PING after this long without anything from the server, and closes
    /// the connection if its ACK does not come within
    /// [`http2_keep_alive_timeout`](Builder::http2_keep_alive_timeout): its requests fail
    /// with [`ErrorKind::Timeout`](super::ErrorKind::Timeout) and the pool hands it out no more, so a dead connection
    /// (a server gone without a FIN) is found instead of waited on. Default `None`: no
    /// PINGs, as hyper's.
    pub fn http2_keep_alive_interval(
        &mut self,
        interval: impl Into<Option<Duration>>,
    ) -> &mut Self {
        self.h2.keep_alive_interval = interval.into();
        self
    }

    /// HTTP/2: how long a keep-alive PING may wait for its ACK (default 20 s).
    pub fn http2_keep_alive_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.h2.keep_alive_timeout = timeout;
        self
    }

    /// HTTP/2: keep-alive PINGs while no request is in flight too (default false: an
    /// idle connection is left to the pool's idle timeout).
    pub fn http2_keep_alive_while_idle(&mut self, on: bool) -> &mut Self {
        self.h2.keep_alive_while_idle = on;
        self
    }

    /// HTTP/2: how long the server may take to acknowledge the client's SETTINGS before
    /// the connection is closed with SETTINGS_TIMEOUT and its requests fail with
    /// [`ErrorKind::Timeout`](super::ErrorKind::Timeout) (RFC 9113 §6.5.3; default 20 s).
    pub fn http2_settings_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.h2.settings_timeout = timeout;
        self
    }

    /// Sends the requests `proxy` takes through it (see [`Proxy`]); proxies are tried in
    /// the order given, the first that takes a request's URI wins, and a request none
    /// takes goes direct. `https://` targets go through a tunnel (SOCKS or `CONNECT`)
    /// with TLS inside; `http://` ones are forwarded to an HTTP proxy in absolute form
    /// (over HTTP/1.1, even with [`Builder::http2_prior_knowledge`]), except through an
    /// `https://` or HTTP/2 proxy, which tunnels every target (a `CONNECT` stream over
    /// HTTP/2 when the proxy speaks it, its tunnels sharing one connection; its TLS
    /// settings are [`Proxy::tls_config`]'s, else [`Builder::tls_config`]'s). The connect
    /// timeout covers the proxy's handshake.
    pub fn proxy(&mut self, proxy: Proxy) -> &mut Self {
        self.proxies.push(proxy);
        self
    }

    /// Also uses the proxies the environment names (`http_proxy`, `https_proxy`,
    /// `all_proxy`, `no_proxy` and their uppercase forms, as curl reads them: see
    /// [`Proxy::from_env`]), after those given to [`Builder::proxy`]. They are read when
    /// the client is built. Default false: the environment is not read.
    pub fn proxy_from_env(&mut self, on: bool) -> &mut Self {
        self.proxy_from_env = on;
        self
    }

    /// `https://` requests go over HTTP/3 (feature `http3`, with [`build_https`](Builder::build_https)),
    /// to the URI's port over UDP, without trying TCP first: for servers known to speak it.
    #[cfg(feature = "http3")]
    pub fn http3_prior_knowledge(&mut self) -> &mut Self {
        self.h3.prior_knowledge = true;
        self
    }

    /// Follow `Alt-Svc` (feature `http3`, with [`build_https`](Builder::build_https)): once
    /// an `https://` response over TCP advertises `h3` (`Alt-Svc: h3=":443"; ma=...`),
    /// that origin's later requests go over HTTP/3 until the advertisement expires or the
    /// server sends `clear`. If the QUIC connection cannot be made, the route is forgotten
    /// and the request goes over TCP. Off by default.
    #[cfg(feature = "http3")]
    pub fn http3_alt_svc(&mut self, on: bool) -> &mut Self {
        self.h3.alt_svc = on;
        self
    }

    /// The [`HttpConnector`] of [`build`](Builder::build) and
    /// [`build_https`](Builder::build_https): with the proxies.
    fn http_connector(&self) -> HttpConnector {
        let from_env = if self.proxy_from_env {
            Proxy::from_env()
        } else {
            Vec::new()
        };
        let proxies: Vec<Proxy> = self.proxies.iter().cloned().chain(from_env).collect();
        let secure = (!proxies.is_empty()).then(|| {
            Arc::new(Proxied::new(
                self.h2.clone(),
                self.idle_timeout,
                #[cfg(feature = "tls")]
                self.tls.clone(),
            ))
        });
        let connector = HttpConnector::new()
            .with_proxies(proxies)
            .with_connect_limits(self.h1.limits);
        match secure {
            Some(s) => connector.with_secure(s),
            None => connector,
        }
    }

    /// The TLS config [`Builder::build_https`] uses (a private CA, a client certificate);
    /// default: the webpki roots. ALPN `h2` and `http/1.1` (or `http/1.1` alone, with
    /// [`Builder::http1_only`]) are filled in when it names no protocol.
    #[cfg(feature = "tls")]
    pub fn tls_config(&mut self, config: Arc<crate::tls::rustls::ClientConfig>) -> &mut Self {
        self.tls = Some(config);
        self
    }

    /// A client for `https` and `http` (feature `tls`): [`HttpsConnector`] over TCP.
    #[cfg(feature = "tls")]
    pub fn build_https(&self) -> Client<HttpsConnector> {
        let config = self
            .tls
            .clone()
            .unwrap_or_else(crate::tls::default_client_config);
        let config = if self.http1_only && config.alpn_protocols.is_empty() {
            let mut c = Arc::unwrap_or_clone(config);
            c.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(c)
        } else {
            config
        };
        #[cfg(feature = "http3")]
        let h3 = http3::Http3::new(self.h3, config.clone());
        let connector = HttpsConnector::wrap(self.http_connector(), config);
        let client = self.build_with_connector(connector);
        #[cfg(feature = "http3")]
        let client = {
            let mut client = client;
            Arc::get_mut(&mut client.inner).expect("just built").h3 = h3;
            client
        };
        client
    }

    /// A client with the [`HttpConnector`] (and the proxies).
    pub fn build(&self) -> Client {
        self.build_with_connector(self.http_connector())
    }

    /// A client with `connector`.
    pub fn build_with_connector<C: Connector>(&self, connector: C) -> Client<C> {
        Client {
            inner: Arc::new(Inner {
                connector,
                pool: Arc::new(IdlePool::new(self.max_idle_per_host, self.idle_timeout)),
                connect_timeout: self.connect_timeout,
                request_timeout: self.request_timeout,
                max_body: self.max_body,
                retry: self.retry,
                h1: self.h1,
                h2: self.h2.clone(),
                h2_prior_knowledge: self.h2_prior_knowledge && !self.http1_only,
                idle_timeout: self.idle_timeout,
                #[cfg(feature = "http3")]
                h3: None,
            }),
        }
    }
}
