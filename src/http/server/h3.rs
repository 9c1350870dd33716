//! HTTP/3 beside the TCP server: the QUIC endpoint that gives each HTTP/3 connection a
//! service from the same app (`http::http3` runs the connections).

use super::Server;
use crate::engine::conn::Handler;
use crate::http::body::Incoming;
use crate::http::service::{BoxError, ConnInfo, MakeService};
use http::{Request, Response};
use http_body::Body;
use std::io;
use std::sync::Arc;
use tower_service::Service;

impl<M, Marker> Server<M, Marker>
where
    Server<M, Marker>: Http3Server,
{
    /// This server's app over HTTP/3 with `tls`'s certificate, as the handler of an
    /// [`Engine`](crate::Engine) UDP binding (what `serve(..).with_http3()` binds), beside
    /// the TCP binding of the server itself (under [`TlsServer`](crate::tls::TlsServer)):
    ///
    /// ```no_run
    /// # fn demo(tls: std::sync::Arc<fibr::tls::rustls::ServerConfig>) -> std::io::Result<()> {
    /// # let app = tower::service_fn(|_req: http::Request<fibr::body::Incoming>| async {
    /// #     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hi")))
    /// # });
    /// use fibr::{Binding, Config, Engine};
    /// let server = fibr::http::Server::new(app);
    /// let h3 = server.http3(tls.clone())?;
    /// let https = fibr::tls::TlsServer::new(tls, server);
    /// let engine = Engine::new(
    ///     Config::default(),
    ///     [Binding::tcp("0.0.0.0:443", https), Binding::udp("0.0.0.0:443", h3)],
    /// )?;
    /// engine.run()
    /// # }
    /// ```
    ///
    /// QUIC's settings are [`ServerConfig::http3`](crate::http::ServerConfig::http3). The
    /// handler takes the binding's datagrams itself ([`Handler::datagrams`]): the binding
    /// keeps no connection per peer address.
    pub fn http3(&self, tls: Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>> {
        self.http3_endpoint(tls)
    }
}

/// What `serve(..).with_http3()` asks of a server: a QUIC endpoint that gives each HTTP/3
/// connection a service from the same app (so it exists wherever `Handler` does).
#[doc(hidden)]
pub trait Http3Server {
    /// The UDP binding's handler for HTTP/3 with `tls`'s certificate.
    fn http3_endpoint(&self, tls: Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>>;
}

impl<M, Marker, S, B> Http3Server for Server<M, Marker>
where
    M: MakeService<Marker, Service = S, Body = B>,
    Marker: 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    fn http3_endpoint(&self, tls: Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>> {
        let cfg = &self.shared.config;
        let limits = crate::http::http3::Limits {
            body_buffer: cfg.body_buffer,
            max_body_size: cfg.max_body_size,
            max_field_section_size: cfg.max_head_bytes as u64,
        };
        let extended_connect = cfg.http3.extended_connect;
        let shared = self.shared.clone();
        let app = Box::new(move |quic, info: ConnInfo, driver| {
            if shared.live.draining() {
                return Err(driver);
            }
            let svc = match shared.make.make_service(&info) {
                Ok(svc) => svc,
                Err(e) => {
                    tracing::debug!(error = %e, "no service for an HTTP/3 connection");
                    return Err(driver);
                }
            };
            shared.live.entered();
            let shared = shared.clone();
            crate::engine::runtime::spawn(crate::http::http3::alongside(driver, async move {
                let drain = shared.drain_started.wait();
                crate::http::http3::serve_connection(quic, svc, limits, extended_connect, drain)
                    .await;
                shared.live.left();
            }));
            Ok(())
        });
        let endpoint: Arc<dyn Handler> =
            crate::http::http3::QuicEndpoint::new(tls, &cfg.http3, app)?;
        Ok(endpoint)
    }
}
