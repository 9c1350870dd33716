//! `https://` (feature `tls`): [`HttpsConnector`] wraps a connector and runs TLS over the
//! streams it makes, with the sans-IO machine the server uses (`crate::proto::tls::Session`, in
//! the client role) and this module as its async driver.

use super::connect::{Connected, Connection, Connector, Forwarding, HttpConnector};
use super::error::{Error, ErrorKind};
use crate::proto::tls::{Event, Session};
use crate::tls::rustls;
use crate::tls::TlsInfo;
use http::uri::{Scheme, Uri};
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

/// Ciphertext read at a time (a whole record fits).
const READ_CHUNK: usize = 20 * 1024;
/// Ciphertext waiting for the socket before writes push back.
const MAX_PENDING_OUT: usize = 64 * 1024;

/// A connector for `https` (and, through the connector it wraps, `http`): SNI from the
/// URI's host, ALPN `h2` and `http/1.1` unless the config names protocols (the client
/// speaks both; the server picks), certificates checked
/// against the config's roots (by default the webpki roots, Mozilla's list).
#[derive(Clone)]
pub struct HttpsConnector<C = HttpConnector> {
    inner: C,
    config: Arc<ClientConfig>,
}

impl HttpsConnector {
    /// TCP underneath, the webpki roots.
    pub fn new() -> HttpsConnector {
        HttpsConnector::with_config(crate::tls::default_client_config())
    }

    /// TCP underneath, `config`'s roots and client certificate (a private CA, tests).
    pub fn with_config(config: Arc<ClientConfig>) -> HttpsConnector {
        HttpsConnector::wrap(HttpConnector::new(), config)
    }
}

impl Default for HttpsConnector {
    fn default() -> HttpsConnector {
        HttpsConnector::new()
    }
}

impl<C> HttpsConnector<C> {
    /// TLS over the streams `inner` makes (`https` URIs through its
    /// [`Connector::connect_tunnel`]; other schemes are `inner`'s own).
    pub fn wrap(inner: C, config: Arc<ClientConfig>) -> HttpsConnector<C> {
        let config = with_alpn(config, &[b"h2", b"http/1.1"]);
        HttpsConnector { inner, config }
    }
}

/// `config`, offering `protocols` by ALPN if it names none itself.
pub(crate) fn with_alpn(config: Arc<ClientConfig>, protocols: &[&[u8]]) -> Arc<ClientConfig> {
    if !config.alpn_protocols.is_empty() {
        return config;
    }
    let mut c = Arc::unwrap_or_clone(config);
    c.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

/// TLS over `io` with the server `host` names (an IPv6 literal in brackets or not), once
/// the handshake is done.
pub(crate) async fn handshake<S: Connection>(
    io: S,
    host: &str,
    config: Arc<ClientConfig>,
) -> Result<TlsStream<S>, Error> {
    // An IPv6 literal is named without its brackets.
    let name = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(name.to_string()).map_err(|e| {
        Error::new(
            ErrorKind::InvalidUri,
            format!("TLS server name {name:?}: {e}"),
        )
    })?;
    let conn = UnbufferedClientConnection::new(config, name)
        .map_err(|e| Error::new(ErrorKind::Connect, format!("TLS: {e}")))?;
    let mut tls = TlsStream::new(io, Session::new(conn, Instant::now(), None));
    poll_fn(|cx| tls.poll_handshake(cx))
        .await
        .map_err(Error::from_connect_io)?;
    Ok(tls)
}

impl<C> std::fmt::Debug for HttpsConnector<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsConnector").finish_non_exhaustive()
    }
}

impl<C: Connector> Connector for HttpsConnector<C> {
    type Io = MaybeHttps<C::Io>;

    async fn connect(&self, dst: &Uri) -> Result<Self::Io, Error> {
        if dst.scheme() != Some(&Scheme::HTTPS) {
            return self.inner.connect(dst).await.map(MaybeHttps::Http);
        }
        let host = dst
            .host()
            .ok_or_else(|| Error::new(ErrorKind::InvalidUri, "the URI has no host"))?;
        let io = self.inner.connect_tunnel(dst).await?;
        let tls = handshake(io, host, self.config.clone()).await?;
        Ok(MaybeHttps::Https(Box::new(tls)))
    }

    fn forwarding(&self, dst: &Uri) -> Option<Forwarding> {
        if dst.scheme() == Some(&Scheme::HTTPS) {
            return None;
        }
        self.inner.forwarding(dst)
    }
}

/// A stream of [`HttpsConnector`]: plain, or TLS over the inner connector's stream.
pub enum MaybeHttps<S> {
    /// An `http://` URI: the inner connector's stream as it is.
    Http(S),
    /// An `https://` URI: TLS over the inner connector's stream.
    Https(Box<TlsStream<S>>),
}

/// TLS over a client stream: plaintext in and out, records on the wire.
pub struct TlsStream<S> {
    io: S,
    session: Session<UnbufferedClientConnection>,
    /// Ciphertext read and not used yet (a partial record).
    incoming: Vec<u8>,
    /// Plaintext decrypted and not read yet, from `plain_at` on.
    plain: Vec<u8>,
    plain_at: usize,
    /// Ciphertext to write, from `out_at` on.
    outgoing: Vec<u8>,
    /// A vectored write's buffers gathered (reused).
    gather: Vec<u8>,
    out_at: usize,
    /// The peer ended its side (close_notify, or the stream's EOF).
    eof: bool,
    opened: bool,
    info: Option<TlsInfo>,
}

impl<S: Connection> TlsStream<S> {
    fn new(io: S, session: Session<UnbufferedClientConnection>) -> TlsStream<S> {
        TlsStream {
            io,
            session,
            incoming: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
            outgoing: Vec::new(),
            gather: Vec::new(),
            out_at: 0,
            eof: false,
            opened: false,
            info: None,
        }
    }

    /// What the handshake negotiated.
    pub fn tls_info(&self) -> Option<&TlsInfo> {
        self.info.as_ref()
    }

    /// Drives the handshake: the ClientHello out, the server's flight in, until open.
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            self.process()?;
            ready!(self.poll_flush_out(cx))?;
            if self.opened {
                return Poll::Ready(Ok(()));
            }
            if self.eof {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed during the TLS handshake",
                )));
            }
            ready!(self.poll_fill(cx))?;
        }
    }

    /// Runs the machine over what was read: plaintext kept, replies queued.
    fn process(&mut self) -> io::Result<()> {
        let mut wire = std::mem::take(&mut self.outgoing);
        let (plain, opened, info) = (&mut self.plain, &mut self.opened, &mut self.info);
        let res = self
            .session
            .receive(&mut self.incoming, &mut wire, &mut |d| {
                match d {
                    Event::Opened(state) => {
                        *opened = true;
                        *info = Some(TlsInfo::new(state));
                    }
                    Event::Data(p) => plain.extend_from_slice(p),
                }
                true
            });
        self.outgoing = wire;
        let r = res?;
        self.incoming.drain(..r.consumed);
        self.eof |= r.peer_closed;
        Ok(())
    }

    /// Reads once from the stream into `incoming` (EOF sets `eof`).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let start = self.incoming.len();
        self.incoming.reserve(READ_CHUNK);
        let n = {
            let spare = self.incoming.spare_capacity_mut();
            let mut rb = hyper::rt::ReadBuf::uninit(spare);
            ready!(hyper::rt::Read::poll_read(
                Pin::new(&mut self.io),
                cx,
                rb.unfilled()
            ))?;
            rb.filled().len()
        };
        // SAFETY: `poll_read` initialized the first `n` bytes of the spare capacity (what
        // `ReadBuf::filled` reports), and `n` is within the capacity reserved above.
        unsafe { self.incoming.set_len(start + n) };
        if n == 0 {
            self.eof = true;
        }
        Poll::Ready(Ok(()))
    }

    /// Writes the queued ciphertext until it is out or the stream is full.
    fn poll_flush_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.out_at < self.outgoing.len() {
            let n = ready!(hyper::rt::Write::poll_write(
                Pin::new(&mut self.io),
                cx,
                &self.outgoing[self.out_at..]
            ))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_at += n;
        }
        self.outgoing.clear();
        self.out_at = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: Connection> hyper::rt::Read for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // What an earlier write left queued goes on while we wait for the answer.
        if let Poll::Ready(Err(e)) = this.poll_flush_out(cx) {
            return Poll::Ready(Err(e));
        }
        loop {
            if this.plain_at < this.plain.len() {
                let n = buf.remaining().min(this.plain.len() - this.plain_at);
                buf.put_slice(&this.plain[this.plain_at..this.plain_at + n]);
                this.plain_at += n;
                if this.plain_at == this.plain.len() {
                    this.plain.clear();
                    this.plain_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            ready!(this.poll_fill(cx))?;
            this.process()?;
        }
    }
}

impl<S: Connection> hyper::rt::Write for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.outgoing.len() - this.out_at >= MAX_PENDING_OUT {
            ready!(this.poll_flush_out(cx))?;
        }
        let mut parts = bufs.iter().filter(|b| !b.is_empty());
        let take = match (parts.next(), parts.next()) {
            (None, _) => return Poll::Ready(Ok(0)),
            // One buffer: sealed as it is.
            (Some(one), None) => {
                let take = one.len().min(MAX_PENDING_OUT);
                this.session
                    .seal(&mut this.incoming, &one[..take], &mut this.outgoing)?;
                take
            }
            // Several (a head and a small body): gathered into one run of records.
            _ => {
                for b in bufs {
                    let room = MAX_PENDING_OUT - this.gather.len();
                    this.gather.extend_from_slice(&b[..b.len().min(room)]);
                }
                let sealed =
                    this.session
                        .seal(&mut this.incoming, &this.gather, &mut this.outgoing);
                let take = this.gather.len();
                this.gather.clear();
                sealed?;
                take
            }
        };
        // Best effort now; the rest goes with the next write, read or flush.
        if let Poll::Ready(Err(e)) = this.poll_flush_out(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(take))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_out(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.opened {
            this.opened = false;
            this.session.close(&mut this.incoming, &mut this.outgoing);
        }
        ready!(this.poll_flush_out(cx))?;
        hyper::rt::Write::poll_shutdown(Pin::new(&mut this.io), cx)
    }
}

impl<S: Connection> Connection for TlsStream<S> {
    fn connected(&self) -> Connected {
        let h2 = self.tls_info().and_then(|i| i.alpn_protocol()) == Some(b"h2");
        if h2 {
            Connected::new().negotiated_h2()
        } else {
            Connected::new()
        }
    }
}

super::connect::stream_enum_io!([S: Connection] MaybeHttps<S> { MaybeHttps::Http, MaybeHttps::Https });

impl<S: Connection> Connection for MaybeHttps<S> {
    fn connected(&self) -> Connected {
        match self {
            MaybeHttps::Http(s) => s.connected(),
            MaybeHttps::Https(s) => s.connected(),
        }
    }
}
