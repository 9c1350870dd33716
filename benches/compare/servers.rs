//! The servers the bench compares, and which scenarios each takes part in.

use crate::Scenario;

pub enum Program {
    /// `examples/bench_server.rs` with this first argument.
    BenchServer(&'static str),
    /// A binary of `benches/peers`.
    Peer(&'static str),
}

pub struct Server {
    /// The name `--servers` takes and the JSON uses.
    pub key: &'static str,
    pub label: &'static str,
    pub program: Program,
    /// Serves every route for real (the floor answers everything with `hello`).
    pub real: bool,
    /// Takes part in the HTTP scenarios (fibr-ws is fibr there: only its `/ws` differs).
    pub http: bool,
    /// Serves the WebSocket echo at `/ws`.
    pub ws: bool,
    /// Negotiates permessage-deflate there.
    pub deflate: bool,
    /// Serves HTTPS when given `BENCH_TLS_CERT` and `BENCH_TLS_KEY`.
    pub tls: bool,
    /// Serves HTTP/2: h2c by prior knowledge beside HTTP/1.1, and h2 over TLS when ALPN
    /// offers it (`BENCH_TLS_ALPN`).
    pub h2: bool,
    /// Serves the gRPC Echo over h2c (`bench_server` when given `BENCH_GRPC=1`).
    pub grpc: bool,
    /// Serves HTTP/3 on UDP at the port it prints (`bench_server` when given
    /// `BENCH_HTTP3=1` with TLS).
    pub h3: bool,
}

impl Server {
    /// Takes part in scenario `sc`.
    pub fn runs(&self, sc: Scenario) -> bool {
        if sc == Scenario::Grpc {
            return self.grpc;
        }
        if sc == Scenario::C10k {
            // Issue 31's four: hyper (axum's Router left out) adds nothing to the seed's
            // headline shape but another minute of 10,000 connections.
            return self.http && self.key != "hyper";
        }
        sc.on_servers()
            && (if sc.ws() {
                self.ws
            } else if sc.h3() {
                self.h3
            } else {
                self.http
            })
            && (!sc.deflate() || self.deflate)
            && (!sc.tls() || self.tls)
            && (!sc.h2() || self.h2)
    }
}

pub const SERVERS: [Server; 8] = [
    Server {
        key: "fibr-ws",
        label: "fibr::ws",
        program: Program::BenchServer("fibr-ws"),
        real: true,
        http: false,
        ws: true,
        deflate: true,
        tls: false,
        h2: false,
        grpc: false,
        h3: false,
    },
    Server {
        key: "fibr",
        label: "fibr",
        program: Program::BenchServer("fibr"),
        real: true,
        http: true,
        ws: true,
        deflate: false,
        tls: true,
        h2: true,
        grpc: true,
        h3: true,
    },
    Server {
        key: "axum",
        label: "axum::serve",
        program: Program::BenchServer("axum"),
        real: true,
        http: true,
        ws: true,
        deflate: false,
        tls: true,
        h2: true,
        grpc: false,
        h3: false,
    },
    Server {
        key: "hyper",
        label: "hyper",
        program: Program::Peer("hyper_plain"),
        real: true,
        http: true,
        ws: false,
        deflate: false,
        tls: false,
        h2: false,
        grpc: false,
        h3: false,
    },
    Server {
        key: "actix",
        label: "actix-web",
        program: Program::Peer("actix"),
        real: true,
        http: true,
        ws: true,
        deflate: false,
        tls: true,
        h2: false,
        grpc: false,
        h3: false,
    },
    Server {
        key: "tonic",
        label: "tonic",
        program: Program::Peer("tonic_grpc"),
        real: false,
        http: false,
        ws: false,
        deflate: false,
        tls: false,
        h2: false,
        grpc: true,
        h3: false,
    },
    Server {
        key: "quinn",
        label: "quinn + h3-quinn",
        program: Program::Peer("h3_quinn"),
        real: true,
        http: false,
        ws: false,
        deflate: false,
        tls: true,
        h2: false,
        grpc: false,
        h3: true,
    },
    Server {
        key: "floor",
        label: "floor",
        program: Program::Peer("floor"),
        real: false,
        http: true,
        ws: false,
        deflate: false,
        tls: false,
        h2: false,
        grpc: false,
        h3: false,
    },
];

/// The ALPN list the h2-over-TLS scenario's servers offer (`BENCH_TLS_ALPN`).
pub const H2_ALPN: &str = "h2,http/1.1";

/// The ratios' base.
pub const BASE: &str = "axum";

pub fn server(key: &str) -> Option<&'static Server> {
    SERVERS.iter().find(|s| s.key == key)
}
