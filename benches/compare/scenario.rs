//! The scenarios the compare bench runs, what each is called and measured with, and the
//! settings (phase lengths, runs, idle connections) of a full and a quick run.

use std::time::Duration;

use crate::{grpc, h1load, h2, h3, micro, side, ws, BASE};

/// How long and how often.
#[derive(Clone, Debug)]
pub struct Settings {
    pub phase: Duration,
    pub warmup: Duration,
    pub runs: usize,
    pub idle_conns: usize,
}

pub const FULL: Settings = Settings {
    phase: Duration::from_secs(5),
    warmup: Duration::from_secs(1),
    runs: 3,
    idle_conns: 10_000,
};

pub const QUICK: Settings = Settings {
    phase: Duration::from_secs(1),
    warmup: Duration::from_secs(1),
    runs: 1,
    idle_conns: 1_000,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scenario {
    Plain,
    Echo,
    Pipelined,
    Churn,
    Idle,
    C10k,
    Rate50,
    Rate80,
    Websocket,
    Ws16k,
    WsDeflate,
    IdleWs,
    IdleWsDeflate,
    TlsPlain,
    TlsPipelined,
    TlsChurn,
    TlsIdle,
    H2cM1,
    H2cM10,
    H2TlsM10,
    H2Idle,
    Grpc,
    H3C1,
    H3C10,
    H3Download,
    H3Idle,
    Client,
    Executor,
    Proxy,
    Files,
    Gateway,
    Arpc,
}

impl Scenario {
    pub const ALL: [Scenario; 32] = [
        Scenario::Plain,
        Scenario::Echo,
        Scenario::Pipelined,
        Scenario::Churn,
        Scenario::Idle,
        Scenario::C10k,
        Scenario::Rate50,
        Scenario::Rate80,
        Scenario::Websocket,
        Scenario::Ws16k,
        Scenario::WsDeflate,
        Scenario::IdleWs,
        Scenario::IdleWsDeflate,
        Scenario::TlsPlain,
        Scenario::TlsPipelined,
        Scenario::TlsChurn,
        Scenario::TlsIdle,
        Scenario::H2cM1,
        Scenario::H2cM10,
        Scenario::H2TlsM10,
        Scenario::H2Idle,
        Scenario::Grpc,
        Scenario::H3C1,
        Scenario::H3C10,
        Scenario::H3Download,
        Scenario::H3Idle,
        Scenario::Client,
        Scenario::Executor,
        Scenario::Proxy,
        Scenario::Files,
        Scenario::Gateway,
        Scenario::Arpc,
    ];

    /// Over HTTPS (or QUIC: with the HTTPS scenarios' certificate).
    pub fn tls(self) -> bool {
        self.h3()
            || matches!(
                self,
                Scenario::TlsPlain
                    | Scenario::TlsPipelined
                    | Scenario::TlsChurn
                    | Scenario::TlsIdle
                    | Scenario::H2TlsM10
            )
    }

    /// HTTP/3 (issue 15): on the servers that speak it, with `h3_load` (`compare/h3.rs`).
    pub fn h3(self) -> bool {
        matches!(
            self,
            Scenario::H3C1 | Scenario::H3C10 | Scenario::H3Download | Scenario::H3Idle
        )
    }

    /// HTTP/2 (issue 13): on the servers that speak it.
    pub fn h2(self) -> bool {
        matches!(
            self,
            Scenario::H2cM1 | Scenario::H2cM10 | Scenario::H2TlsM10 | Scenario::H2Idle
        )
    }

    /// The plain-text scenario whose load a TLS one runs over https (itself otherwise).
    pub fn plain(self) -> Scenario {
        match self {
            Scenario::TlsPlain => Scenario::Plain,
            Scenario::TlsPipelined => Scenario::Pipelined,
            Scenario::TlsChurn => Scenario::Churn,
            Scenario::TlsIdle => Scenario::Idle,
            Scenario::H2TlsM10 => Scenario::H2cM10,
            sc => sc,
        }
    }

    /// Idle connections' memory rather than a load.
    pub fn idle(self) -> bool {
        matches!(
            self.plain(),
            Scenario::Idle
                | Scenario::H2Idle
                | Scenario::H3Idle
                | Scenario::IdleWs
                | Scenario::IdleWsDeflate
        )
    }

    /// WebSocket (`/ws`): on the servers that speak it, with `compare/ws.rs`'s client.
    pub fn ws(self) -> bool {
        matches!(
            self,
            Scenario::Websocket
                | Scenario::Ws16k
                | Scenario::WsDeflate
                | Scenario::IdleWs
                | Scenario::IdleWsDeflate
        )
    }

    /// With permessage-deflate: on the servers that negotiate it.
    pub fn deflate(self) -> bool {
        matches!(self, Scenario::WsDeflate | Scenario::IdleWsDeflate)
    }

    /// A fixed-rate scenario: its share of axum::serve's saturated keep-alive GET
    /// throughput (`compare/h1load.rs`).
    pub fn rate(self) -> Option<f64> {
        match self {
            Scenario::Rate50 => Some(0.5),
            Scenario::Rate80 => Some(0.8),
            _ => None,
        }
    }

    /// Reports p50, p99.9 (and at a fixed rate, the largest) latency beside p99: the
    /// scenarios `compare/h1load.rs` loads.
    pub fn percentiles(self) -> bool {
        self == Scenario::C10k || self.rate().is_some()
    }

    /// Measured on the servers (the others run a bench of their own).
    pub fn on_servers(self) -> bool {
        !matches!(
            self,
            Scenario::Client
                | Scenario::Executor
                | Scenario::Proxy
                | Scenario::Files
                | Scenario::Gateway
                | Scenario::Arpc
        )
    }

    /// The server the ratios are to: tonic's own for gRPC, quinn for HTTP/3, axum::serve
    /// otherwise.
    pub fn base(self) -> &'static str {
        match self {
            Scenario::Grpc => "tonic",
            sc if sc.h3() => "quinn",
            _ => BASE,
        }
    }

    /// The name `--only` takes and the JSON uses.
    pub fn key(self) -> &'static str {
        match self {
            Scenario::Plain => "plain",
            Scenario::Echo => "echo",
            Scenario::Pipelined => "pipelined",
            Scenario::Churn => "churn",
            Scenario::Idle => "idle",
            Scenario::C10k => "c10k",
            Scenario::Rate50 => "rate50",
            Scenario::Rate80 => "rate80",
            Scenario::Websocket => "ws",
            Scenario::Ws16k => "ws16k",
            Scenario::WsDeflate => "wsdeflate",
            Scenario::IdleWs => "idle-ws",
            Scenario::IdleWsDeflate => "idle-wsdeflate",
            Scenario::TlsPlain => "tls-plain",
            Scenario::TlsPipelined => "tls-pipelined",
            Scenario::TlsChurn => "tls-churn",
            Scenario::TlsIdle => "tls-idle",
            Scenario::H2cM1 => "h2c-m1",
            Scenario::H2cM10 => "h2c-m10",
            Scenario::H2TlsM10 => "h2-tls-m10",
            Scenario::H2Idle => "h2-idle",
            Scenario::Grpc => "grpc",
            Scenario::H3C1 => "h3-c1",
            Scenario::H3C10 => "h3-c10",
            Scenario::H3Download => "h3-download",
            Scenario::H3Idle => "h3-idle",
            Scenario::Client => "client",
            Scenario::Executor => "executor",
            Scenario::Proxy => "proxy",
            Scenario::Files => "files",
            Scenario::Gateway => "gateway",
            Scenario::Arpc => "arpc",
        }
    }

    /// What the scenario counts: HTTP requests, WebSocket messages, or MiB downloaded.
    pub fn unit(self) -> &'static str {
        match self {
            sc if sc.ws() => "msg",
            Scenario::H3Download => "MiB",
            _ => "req",
        }
    }

    /// `websocket`: the 64-byte echo's key before the other WebSocket scenarios came (in
    /// older JSON results).
    pub fn from_key(key: &str) -> Option<Scenario> {
        match key {
            "websocket" => Some(Scenario::Websocket),
            key => Scenario::ALL.into_iter().find(|s| s.key() == key),
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Scenario::Plain => "keep-alive GET /",
            Scenario::Echo => "POST /echo 1 KiB",
            Scenario::Pipelined => "pipelined GET / ×16",
            Scenario::Churn => "connection churn",
            Scenario::Idle => "idle keep-alive",
            Scenario::C10k => "10,000 connections, POST 1 KiB",
            Scenario::Rate50 => "GET / at 50 % of axum's rate",
            Scenario::Rate80 => "GET / at 80 % of axum's rate",
            Scenario::Websocket => "WebSocket echo 64 B",
            Scenario::Ws16k => "WebSocket echo 16 KiB binary",
            Scenario::WsDeflate => "WebSocket echo 1 KiB, deflate",
            Scenario::IdleWs => "idle WebSocket",
            Scenario::IdleWsDeflate => "idle WebSocket, deflate",
            Scenario::TlsPlain => "HTTPS keep-alive GET /",
            Scenario::TlsPipelined => "HTTPS pipelined GET / ×16",
            Scenario::TlsChurn => "HTTPS handshake churn",
            Scenario::TlsIdle => "idle TLS keep-alive",
            Scenario::H2cM1 => "h2c GET /, 1 stream per connection",
            Scenario::H2cM10 => "h2c GET /, 10 streams per connection",
            Scenario::H2TlsM10 => "h2 over TLS GET /, 10 streams per connection",
            Scenario::H2Idle => "idle h2c connections",
            Scenario::Grpc => "gRPC unary, 10 streams per connection",
            Scenario::H3C1 => "HTTP/3 GET /, 1 stream per connection",
            Scenario::H3C10 => "HTTP/3 GET /, 10 streams per connection",
            Scenario::H3Download => "HTTP/3 10 MiB download",
            Scenario::H3Idle => "idle HTTP/3 connections",
            Scenario::Client => "HTTP client",
            Scenario::Executor => "executor",
            Scenario::Proxy => "SOCKS5 and CONNECT proxy",
            Scenario::Files => "static files",
            Scenario::Gateway => "reverse proxy",
            Scenario::Arpc => "arpc",
        }
    }

    /// The load, as a command line (with the phase length).
    pub fn tool(self, set: &Settings) -> String {
        let secs = set.phase.as_secs().max(1);
        match self {
            Scenario::Plain => format!("wrk -t1 -c100 -d{secs}s --latency"),
            Scenario::Echo => format!("wrk -t1 -c100 -d{secs}s --latency -s post.lua"),
            Scenario::Pipelined => format!("h2load --h1 -c100 -m16 -D{secs}"),
            Scenario::Churn => format!("ab -c50 -t{secs} (no -k)"),
            Scenario::Idle => format!("{} connections, one GET each", set.idle_conns),
            Scenario::C10k => format!(
                "10,000 connections × POST /echo 1 KiB, one in flight each, -d{secs}s (own \
                 generator)"
            ),
            Scenario::Rate50 | Scenario::Rate80 => format!(
                "{} connections × GET /, fixed rate, latency from each request's scheduled \
                 send, -d{secs}s (own generator)",
                h1load::RATE_CONNS
            ),
            Scenario::Websocket | Scenario::Ws16k | Scenario::WsDeflate => format!(
                "{} connections × {} echo, -d{secs}s",
                ws::CONNS,
                ws::Kind::of(self).describe()
            ),
            Scenario::IdleWs | Scenario::IdleWsDeflate => format!(
                "{} WebSocket connections, one {} echo each",
                set.idle_conns,
                ws::Kind::of(self).describe()
            ),
            Scenario::TlsPlain => format!("wrk -t1 -c100 -d{secs}s --latency https://"),
            Scenario::TlsPipelined => format!("h2load --h1 -c100 -m16 -D{secs} https://"),
            Scenario::TlsChurn => format!("ab -c50 -t{secs} -f TLS1.3 https:// (no -k)"),
            Scenario::TlsIdle => format!(
                "{} TLS connections, one GET each (rustls client)",
                set.idle_conns
            ),
            Scenario::H2cM1 | Scenario::H2cM10 => format!(
                "h2load -c{} -m{} -D{secs} http:// (h2c, prior knowledge)",
                h2::CONNS,
                h2::streams(self)
            ),
            Scenario::H2TlsM10 => format!(
                "h2load -c{} -m{} -D{secs} https:// (ALPN h2)",
                h2::CONNS,
                h2::streams(self)
            ),
            Scenario::H2Idle => format!(
                "{} h2c connections: preface, SETTINGS, one GET each",
                set.idle_conns
            ),
            Scenario::Grpc => format!(
                "h2load -c{} -m{} -D{secs} -d {}-byte message (h2c, gRPC unary)",
                h2::CONNS,
                h2::streams(self),
                grpc::MESSAGE.len()
            ),
            Scenario::H3C1 | Scenario::H3C10 => format!(
                "h3_load: {} connections × {} GET / in flight, -d{secs}s (quinn + h3 client)",
                h3::CONNS,
                h3::streams(self)
            ),
            Scenario::H3Download => format!(
                "h3_load: GET /bytes/{} one after another on 1 connection, -d{secs}s",
                h3::DOWNLOAD_BYTES
            ),
            Scenario::H3Idle => format!(
                "{} QUIC connections (h3_load), one GET each",
                h3::idle_conns(set)
            ),
            Scenario::Client => micro::CLIENT.command(set.phase == QUICK.phase),
            Scenario::Executor => micro::EXECUTOR.command(set.phase == QUICK.phase),
            Scenario::Proxy => micro::PROXY.command(set.phase == QUICK.phase),
            Scenario::Files => side::FILES.command(set.phase == QUICK.phase),
            Scenario::Gateway => side::GATEWAY.command(set.phase == QUICK.phase),
            Scenario::Arpc => side::ARPC.command(set.phase == QUICK.phase),
        }
    }
}
