//! The goals table: each issue's goals for fibr against the figures measured.

use super::*;

impl Report {
    /// A row per goal: the goal, the measured figure, met or not ("not measured" when the
    /// run left it out).
    pub(super) fn goals(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "| goal (issue 5 unless noted) | measured | result |");
        let _ = writeln!(out, "|---|---:|---|");
        let mut row = |goal: String, value: f64, shown: String, ok: bool| {
            let result = if value.is_nan() {
                "not measured"
            } else if ok {
                "met"
            } else {
                "**not met**"
            };
            let shown = if value.is_nan() { "—".into() } else { shown };
            let _ = writeln!(out, "| {goal} | {shown} | {result} |");
        };
        let plain = self.ratio(Scenario::Plain, "fibr", "axum", CPU_PER_REQ);
        row(
            format!("CPU/request vs axum::serve, keep-alive GET ≤ {GOAL_PLAIN_CPU:.2}×"),
            plain,
            fmt_ratio(plain),
            plain <= GOAL_PLAIN_CPU,
        );
        let pipe = self.ratio(Scenario::Pipelined, "fibr", "axum", CPU_PER_REQ);
        row(
            format!("CPU/request vs axum::serve, pipelined ≤ {GOAL_PIPELINED_CPU:.2}×"),
            pipe,
            fmt_ratio(pipe),
            pipe <= GOAL_PIPELINED_CPU,
        );
        let idle = self.median(Scenario::Idle, "fibr", PER_CONN);
        row(
            format!("idle memory ≤ {GOAL_IDLE_BYTES:.0} B per connection"),
            idle,
            format!("{idle:.0} B"),
            idle <= GOAL_IDLE_BYTES,
        );
        let floor = self.ratio(Scenario::Plain, "fibr", "floor", CPU_PER_REQ);
        row(
            format!("CPU/request vs the floor, keep-alive GET ≤ {GOAL_FLOOR_CPU:.2}×"),
            floor,
            fmt_ratio(floor),
            floor <= GOAL_FLOOR_CPU,
        );
        // The stretch: fibr below actix-web's CPU per request in every HTTP/1 load
        // scenario, and below its memory per idle connection.
        let mut parts = Vec::new();
        let mut all = true;
        let mut any = false;
        for sc in Scenario::ALL
            .into_iter()
            .filter(|sc| sc.on_servers() && !sc.ws() && !sc.tls() && !sc.h2())
        {
            let f = if sc.idle() { PER_CONN } else { CPU_PER_REQ };
            let r = self.ratio(sc, "fibr", "actix", f);
            if r.is_finite() {
                any = true;
                all &= r < 1.0;
                parts.push(format!("{} {}", sc.key(), fmt_ratio(r)));
            }
        }
        row(
            "stretch: fibr ahead of actix-web on every plain-text HTTP/1 scenario (CPU/request; idle: RSS/connection)".into(),
            if any { 0.0 } else { f64::NAN },
            parts.join(", "),
            all,
        );
        let tls_plain = self.ratio(Scenario::TlsPlain, "fibr", "axum", CPU_PER_REQ);
        row(
            format!(
                "(issue 12) HTTPS CPU/request vs axum on tokio-rustls, keep-alive GET ≤ \
                 {GOAL_TLS_PLAIN_CPU:.2}×"
            ),
            tls_plain,
            fmt_ratio(tls_plain),
            tls_plain <= GOAL_TLS_PLAIN_CPU,
        );
        let tls_pipe = self.ratio(Scenario::TlsPipelined, "fibr", "axum", CPU_PER_REQ);
        row(
            format!(
                "(issue 12) HTTPS CPU/request vs axum on tokio-rustls, pipelined ≤ \
                 {GOAL_TLS_PIPELINED_CPU:.2}×"
            ),
            tls_pipe,
            fmt_ratio(tls_pipe),
            tls_pipe <= GOAL_TLS_PIPELINED_CPU,
        );
        let tls_idle = self.median(Scenario::TlsIdle, "fibr", PER_CONN);
        row(
            format!(
                "(issue 12) idle TLS memory ≤ {} B per connection",
                fmt_int(GOAL_TLS_IDLE_BYTES)
            ),
            tls_idle,
            format!("{} B", fmt_int(tls_idle)),
            tls_idle <= GOAL_TLS_IDLE_BYTES,
        );
        for (sc, goal, what) in [
            (
                Scenario::H2cM1,
                GOAL_H2_M1_CPU,
                "h2c, 1 stream per connection",
            ),
            (
                Scenario::H2cM10,
                GOAL_H2_M10_CPU,
                "h2c, 10 streams per connection",
            ),
            (
                Scenario::H2TlsM10,
                GOAL_H2_M10_CPU,
                "h2 over TLS, 10 streams per connection",
            ),
        ] {
            let r = self.ratio(sc, "fibr", "axum", CPU_PER_REQ);
            row(
                format!("(issue 13) HTTP/2 CPU/request vs axum::serve, {what} ≤ {goal:.2}×"),
                r,
                fmt_ratio(r),
                r <= goal,
            );
        }
        let h2_idle = self.median(Scenario::H2Idle, "fibr", PER_CONN);
        row(
            format!(
                "(issue 13) idle h2c memory ≤ {} B per connection",
                fmt_int(GOAL_H2_IDLE_BYTES)
            ),
            h2_idle,
            format!("{} B", fmt_int(h2_idle)),
            h2_idle <= GOAL_H2_IDLE_BYTES,
        );
        let grpc = self.ratio(Scenario::Grpc, "fibr", "tonic", CPU_PER_REQ);
        row(
            format!(
                "(issue 13) gRPC unary CPU/request vs tonic's own server ≤ {GOAL_GRPC_CPU:.2}×"
            ),
            grpc,
            fmt_ratio(grpc),
            grpc <= GOAL_GRPC_CPU,
        );
        for (base, label, goal) in [
            ("actix", "actix-ws", GOAL_WS_ACTIX_CPU),
            ("axum", "axum::serve", GOAL_WS_AXUM_CPU),
        ] {
            let r = self.ratio(Scenario::Websocket, "fibr-ws", base, CPU_PER_REQ);
            row(
                format!("(issue 14) fibr::ws CPU/message vs {label}, 64 B echo ≤ {goal:.2}×"),
                r,
                fmt_ratio(r),
                r <= goal,
            );
        }
        for (sc, goal, what) in [
            (Scenario::IdleWs, GOAL_WS_IDLE_BYTES, "without compression"),
            (
                Scenario::IdleWsDeflate,
                GOAL_WS_DEFLATE_IDLE_BYTES,
                "with deflate, no context takeover",
            ),
        ] {
            let b = self.median(sc, "fibr-ws", PER_CONN);
            row(
                format!(
                    "(issue 14) idle fibr::ws memory {what} ≤ {} B per connection",
                    fmt_int(goal)
                ),
                b,
                format!("{} B", fmt_int(b)),
                b <= goal,
            );
        }
        for (sc, goal, what) in crate::h3::GOALS {
            let f = if sc.idle() { PER_CONN } else { CPU_PER_REQ };
            let r = self.ratio(sc, "fibr", "quinn", f);
            row(
                format!("(issue 15) HTTP/3 {what} vs quinn + h3-quinn ≤ {goal:.2}×"),
                r,
                fmt_ratio(r),
                r <= goal,
            );
        }
        let (mt, ct) = (
            self.client_ratio("fibr", "mt"),
            self.client_ratio("fibr", CLIENT_CT),
        );
        let worst = mt.max(ct);
        row(
            format!(
                "(issue 4) fibr::client CPU/request vs hyper-util legacy ≤ {GOAL_CLIENT_CPU:.2}× \
                 (tokio multi-thread; current-thread)"
            ),
            if self.client.is_some() {
                worst
            } else {
                f64::NAN
            },
            format!("{}; {}", fmt_ratio(mt), fmt_ratio(ct)),
            mt <= GOAL_CLIENT_CPU && ct <= GOAL_CLIENT_CPU,
        );
        let figs = self.exec_figs().unwrap_or_default();
        let ratios: Vec<(String, f64)> = figs
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    median(f.fibr.clone()) / median(f.tokio.clone()),
                )
            })
            .collect();
        row(
            format!(
                "(issue 2) executor: fibr at or below tokio's ns per task in every scenario \
                 (≤ {GOAL_EXECUTOR:.2}×)"
            ),
            if ratios.is_empty() { f64::NAN } else { 0.0 },
            ratios
                .iter()
                .map(|(n, r)| format!("{n} {}", fmt_ratio(*r)))
                .collect::<Vec<_>>()
                .join(", "),
            ratios.iter().all(|(_, r)| *r <= GOAL_EXECUTOR),
        );
        let proxy = self.proxy_figs().unwrap_or_default();
        let fig = |name: &str| proxy.iter().find(|f| f.name == name);
        let ratio = |name: &str| {
            fig(name).map_or(f64::NAN, |f| {
                median(f.fibr.clone()) / median(f.tokio.clone())
            })
        };
        let (connect, socks5) = (ratio("connect-1gib"), ratio("socks5-1gib"));
        row(
            format!(
                "(issue 16) proxy CPU per GiB vs the tokio proxy ≤ {GOAL_PROXY_GIB_CPU:.2}× \
                 (CONNECT; SOCKS5)"
            ),
            connect.max(socks5),
            format!("{}; {}", fmt_ratio(connect), fmt_ratio(socks5)),
            connect <= GOAL_PROXY_GIB_CPU && socks5 <= GOAL_PROXY_GIB_CPU,
        );
        let pingpong = ratio("pingpong");
        row(
            format!(
                "(issue 16) proxy CPU per 64-byte exchange vs the tokio proxy ≤ \
                 {GOAL_PROXY_PINGPONG_CPU:.2}×"
            ),
            pingpong,
            fmt_ratio(pingpong),
            pingpong <= GOAL_PROXY_PINGPONG_CPU,
        );
        let idle = fig("idle").map_or(f64::NAN, |f| median(f.fibr.clone()));
        row(
            format!(
                "(issue 16) memory per idle tunnel (fibr) ≤ {} B",
                fmt_int(GOAL_PROXY_IDLE_BYTES)
            ),
            idle,
            format!("{} B", fmt_int(idle)),
            idle <= GOAL_PROXY_IDLE_BYTES,
        );
        out
    }
}
