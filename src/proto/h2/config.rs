//! HTTP/2 settings of fibr's server: what it advertises in SETTINGS and the bounds that
//! protect it from a hostile peer.

use std::time::Duration;

/// HTTP/2 settings and limits of fibr's HTTP server (`ServerConfig::http2`).
///
/// Every limit is a protection with a sane default: a peer that exceeds one gets the
/// error code RFC 9113 names (a `RST_STREAM` for one stream, a `GOAWAY` for the whole
/// connection) and never unbounded memory.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Http2Config {
    /// Serve HTTP/2 without TLS when a client opens with the HTTP/2 preface ("prior
    /// knowledge"), beside HTTP/1.1 on the same port.
    pub h2c: bool,
    /// Serve only HTTP/2: a connection that does not open with the HTTP/2 preface gets a
    /// GOAWAY(PROTOCOL_ERROR) and is closed (with TLS, ALPN offers only `h2`).
    pub only: bool,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams the client may have open at once; one more
    /// is refused (`RST_STREAM(REFUSED_STREAM)`).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send before the
    /// service reads them (the stream's body buffer).
    pub initial_stream_window: u32,
    /// The connection's receive window: request body bytes of all streams together that
    /// may be buffered before the services read them.
    pub initial_connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload the client may send.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest decoded header list of a request (RFC
    /// 9113's size: names + values + 32 per field); over it the request gets 431. A header
    /// block (HEADERS + CONTINUATION) larger than this on the wire closes the connection
    /// (the CONTINUATION flood).
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK dynamic table the client may use towards us.
    pub header_table_size: u32,
    /// Streams the client may reset within `reset_window` before the connection is closed
    /// with `ENHANCE_YOUR_CALM` (the rapid-reset attack, CVE-2023-44487).
    pub max_resets: u32,
    /// The window `max_resets` counts in.
    pub reset_window: Duration,
    /// Streams the server reset whose ids it remembers, newest first: frames the client
    /// sent on them before it saw the `RST_STREAM` are ignored (RFC 9113 §5.1), with their
    /// DATA still counted against the connection's window. A frame on a reset stream older
    /// than these is answered as on any closed stream (`RST_STREAM(STREAM_CLOSED)`, or for
    /// HEADERS a connection error).
    pub reset_streams_remembered: u32,
    /// Frames that do no work (SETTINGS, PING, empty DATA, PRIORITY, unknown types, ...)
    /// the client may send per request it makes, plus a base of this many, before the
    /// connection is closed with `ENHANCE_YOUR_CALM` (control-frame floods).
    pub max_idle_frames: u32,
    /// Send a PING after this long without a frame from the client; close the connection
    /// if its answer does not come within `keep_alive_timeout`.
    pub keep_alive_interval: Option<Duration>,
    /// How long a keep-alive PING may wait for its answer.
    pub keep_alive_timeout: Duration,
    /// How long a response may wait for a client that keeps its window closed before the
    /// stream is reset (`CANCEL`): a zero window would otherwise hold the response's memory
    /// forever.
    pub window_stall_timeout: Option<Duration>,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441): accept extended CONNECT (a `:protocol`
    /// pseudo-header), which is how a WebSocket opens over HTTP/2. The request carries a
    /// `fibr::http::Protocol`. On by default with feature `ws`. (With feature `tunnel`,
    /// the body of every CONNECT, extended or not, is kept for whoever takes the stream,
    /// `fibr::ws` or `fibr::http::tunnel`, and the service's own is empty.)
    pub extended_connect: bool,
}

impl Default for Http2Config {
    fn default() -> Http2Config {
        Http2Config {
            h2c: true,
            only: false,
            max_concurrent_streams: 250,
            initial_stream_window: 64 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_header_list_size: 64 * 1024,
            header_table_size: 4096,
            max_resets: 200,
            reset_window: Duration::from_secs(10),
            reset_streams_remembered: 32,
            max_idle_frames: 10_000,
            keep_alive_interval: None,
            keep_alive_timeout: Duration::from_secs(20),
            window_stall_timeout: Some(Duration::from_secs(30)),
            extended_connect: cfg!(feature = "ws"),
        }
    }
}

config_setters!(Http2Config {
    set with_h2c => h2c: bool,
    set with_only => only: bool,
    set with_max_concurrent_streams => max_concurrent_streams: u32,
    set with_initial_stream_window => initial_stream_window: u32,
    set with_initial_connection_window => initial_connection_window: u32,
    set with_max_frame_size => max_frame_size: u32,
    set with_max_header_list_size => max_header_list_size: u32,
    set with_header_table_size => header_table_size: u32,
    set with_max_resets => max_resets: u32,
    set with_reset_window => reset_window: Duration,
    set with_reset_streams_remembered => reset_streams_remembered: u32,
    set with_max_idle_frames => max_idle_frames: u32,
    opt with_keep_alive_interval => keep_alive_interval: Duration,
    set with_keep_alive_timeout => keep_alive_timeout: Duration,
    opt with_window_stall_timeout => window_stall_timeout: Duration,
    set with_extended_connect => extended_connect: bool,
});

/// What the server machine reads of the driver's `ServerConfig`: its HTTP/2 settings and
/// the timeouts every protocol shares, so that the machine depends on no driver type.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerLimits {
    pub http2: Http2Config,
    /// The preface and first SETTINGS (HTTP/2's request head) must come within it.
    pub header_read_timeout: Option<Duration>,
    /// A request body that stalls this long fails and its stream is reset.
    pub body_read_timeout: Option<Duration>,
    /// A connection with no stream open closes after it.
    pub idle_timeout: Option<Duration>,
}
