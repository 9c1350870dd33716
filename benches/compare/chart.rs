//! The compare bench's SVG chart.

use super::*;

impl Report {
    /// A horizontal bar chart of CPU per request (idle: RSS per connection; WebSocket: per
    /// message; at a fixed rate: p99 latency) relative to each scenario's base (axum::serve; gRPC: tonic), per scenario and server; below it, fibr's client,
    /// executor and proxy relative to hyper-util and tokio.
    pub fn svg(&self) -> String {
        let servers = self.servers();
        let scenarios = self.scenarios();
        const BAR: f64 = 13.0;
        const GAP: f64 = 3.0;
        const GROUP_GAP: f64 = 16.0;
        const LEFT: f64 = 190.0;
        const PLOT: f64 = 460.0;
        const WIDTH: f64 = 800.0;
        const TOP: f64 = 100.0;
        let colors = |key: &str| match key {
            "fibr" => "#e8590c",
            "fibr-ws" => "#ffa94d",
            "axum" => "#1c7ed6",
            "hyper" => "#74c0fc",
            "actix" => "#7950f2",
            "tonic" => "#2f9e44",
            "quinn" => "#0ca678",
            _ => "#868e96",
        };
        // A group of bars: (title, [(row label, color, ratio, absolute label)]). A server
        // group's rows are unlabelled (the legend tells them apart).
        type Bar = (String, &'static str, f64, String);
        let mut groups: Vec<(String, Vec<Bar>)> = Vec::new();
        for &sc in &scenarios {
            let mut bars = Vec::new();
            for s in servers.iter().filter(|s| self.cell(sc, s.key).is_some()) {
                let (f, unit): (Figure, fn(f64) -> String) = match sc {
                    sc if sc.idle() => (PER_CONN, |x| format!("{} B/conn", fmt_int(x))),
                    sc if sc.ws() => (CPU_PER_REQ, |x| format!("{x:.2} µs/msg")),
                    Scenario::H3Download => (CPU_PER_REQ, |x| format!("{x:.0} µs/MiB")),
                    sc if sc.rate().is_some() => (P99, |x| format!("p99 {}", fmt_us(x))),
                    _ => (CPU_PER_REQ, |x| format!("{x:.2} µs/req")),
                };
                let abs = self.median(sc, s.key, f);
                let r = self.ratio(sc, s.key, sc.base(), f);
                let label = if abs.is_finite() {
                    unit(abs)
                } else {
                    "—".into()
                };
                bars.push((String::new(), colors(s.key), r, label));
            }
            groups.push((sc.title().to_string(), bars));
        }
        // fibr's own rows: the client's CPU per request over hyper-util's (multi-thread
        // runtime), the executor's ns per operation over tokio's.
        let mut own: Vec<(String, Vec<Bar>)> = Vec::new();
        if let Some(figs) = self.client_figs() {
            let base = figs
                .iter()
                .find(|c| c.key == CLIENT_BASE)
                .map_or(f64::NAN, |c| median(c.cpu_per_req.clone()));
            let bars = figs
                .iter()
                .map(|c| {
                    let cpu = median(c.cpu_per_req.clone());
                    let (label, color) = match c.key.as_str() {
                        "fibr" => ("fibr::client", "#e8590c"),
                        "raw" => ("hand-written, fibr::net", "#ffa94d"),
                        "hyper_on_fibr" => ("hyper conn on fibr::net", "#ffd8a8"),
                        CLIENT_BASE => ("hyper-util (tokio mt)", "#1c7ed6"),
                        CLIENT_CT => ("hyper-util (tokio ct)", "#74c0fc"),
                        _ => ("?", "#868e96"),
                    };
                    let label = if label == "?" { c.key.as_str() } else { label };
                    (
                        label.to_string(),
                        color,
                        cpu / base,
                        format!("{cpu:.2} µs/req"),
                    )
                })
                .collect();
            own.push(("HTTP client CPU/request".into(), bars));
        }
        if let Some(figs) = self.exec_figs() {
            let bars = figs
                .iter()
                .map(|f| {
                    let (fibr, tokio) = (median(f.fibr.clone()), median(f.tokio.clone()));
                    let unit = f.unit.trim_start_matches("ns/");
                    (
                        f.name.clone(),
                        "#e8590c",
                        fibr / tokio,
                        format!("{fibr:.0} vs {tokio:.0} ns/{unit}"),
                    )
                })
                .collect();
            own.push(("executor, fibr vs tokio".into(), bars));
        }
        if let Some(figs) = self.proxy_figs() {
            let bars = figs
                .iter()
                .map(|f| {
                    let (fibr, tokio) = (median(f.fibr.clone()), median(f.tokio.clone()));
                    (
                        f.name.clone(),
                        "#e8590c",
                        fibr / tokio,
                        format!("{fibr:.1} vs {tokio:.1} {}", f.unit),
                    )
                })
                .collect();
            own.push(("proxy, fibr vs tokio".into(), bars));
        }
        let max = groups
            .iter()
            .chain(&own)
            .flat_map(|g| g.1.iter().map(|b| b.2))
            .filter(|r| r.is_finite())
            .fold(1.0f64, f64::max)
            .min(6.0);
        let xmax = ((max * 2.0).ceil() / 2.0).max(1.5);
        let x = |r: f64| LEFT + PLOT * (r.min(xmax) / xmax);
        let group_h = |n: usize| n as f64 * (BAR + GAP) - GAP;
        let servers_h: f64 = groups.iter().map(|g| group_h(g.1.len()) + GROUP_GAP).sum();
        // fibr's own panel, below the servers' axis labels: a heading, then per group a
        // title line and its bars.
        const PANEL_GAP: f64 = 24.0;
        const OWN_HEAD: f64 = 26.0;
        const OWN_TITLE: f64 = 16.0;
        let own_start = if groups.is_empty() {
            TOP - 40.0
        } else {
            TOP + servers_h + PANEL_GAP
        };
        let own_body: f64 = own
            .iter()
            .map(|g| OWN_TITLE + group_h(g.1.len()) + GROUP_GAP)
            .sum();
        let height = if own.is_empty() {
            TOP + servers_h + 40.0
        } else {
            own_start + OWN_HEAD + own_body - GROUP_GAP + 30.0
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" \
             viewBox=\"0 0 {WIDTH} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = writeln!(
            out,
            "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n\
             <text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Server CPU time per \
             request, relative to axum::serve (lower is better)</text>\n\
             <text x=\"10\" y=\"40\" fill=\"#555\">idle: RSS per connection; \
             WebSocket: CPU per message; fixed rate: p99 latency. {} worker(s) per server; server and load on separate \
             cores.</text>\n\
             <text x=\"10\" y=\"56\" fill=\"#555\">{} · {} · {}</text>",
            xml(&self.workers),
            xml(&self.command),
            xml(&self.machine),
            xml(&self.date)
        );
        // Legend.
        let mut lx = LEFT;
        for s in &servers {
            let _ = writeln!(
                out,
                "<rect x=\"{lx:.0}\" y=\"66\" width=\"12\" height=\"12\" fill=\"{}\"/>\
                 <text x=\"{:.0}\" y=\"76\">{}</text>",
                colors(s.key),
                lx + 16.0,
                xml(s.label)
            );
            lx += 24.0 + 7.5 * s.label.len() as f64;
        }
        // Grid every 0.5×, the reference line at 1×, over a band of the chart.
        let grid = |out: &mut String, top: f64, bottom: f64| {
            let mut g = 0.0;
            while g <= xmax + 1e-9 {
                let gx = x(g);
                let (stroke, dash) = if (g - 1.0).abs() < 1e-9 {
                    ("#1c7ed6", " stroke-dasharray=\"4 3\"")
                } else {
                    ("#dee2e6", "")
                };
                let _ = writeln!(
                    out,
                    "<line x1=\"{gx:.1}\" y1=\"{top:.0}\" x2=\"{gx:.1}\" y2=\"{bottom:.0}\" stroke=\"{stroke}\"{dash}/>\
                     <text x=\"{gx:.1}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#555\">{g:.1}×</text>",
                    bottom + 14.0
                );
                g += 0.5;
            }
        };
        let bar = |out: &mut String, y: f64, color: &str, r: f64, abs: &str, title: &str| {
            if !r.is_finite() {
                return;
            }
            let w = x(r) - LEFT;
            let clipped = if r > xmax { " ▶" } else { "" };
            let _ = writeln!(
                out,
                "<rect x=\"{LEFT:.0}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{BAR}\" fill=\"{color}\">\
                 <title>{}: {}</title></rect>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}{clipped} ({})</text>",
                xml(title),
                xml(abs),
                LEFT + w + 4.0,
                y + BAR - 2.5,
                fmt_ratio(r),
                xml(abs)
            );
        };
        if !groups.is_empty() {
            grid(&mut out, TOP - 6.0, TOP + servers_h - GROUP_GAP + 6.0);
        }
        let mut y = TOP;
        for (title, bars) in &groups {
            let _ = writeln!(
                out,
                "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\" font-weight=\"bold\">{}</text>",
                LEFT - 8.0,
                y + group_h(bars.len()) / 2.0 + 4.0,
                xml(title)
            );
            for (_, color, r, abs) in bars {
                bar(&mut out, y, color, *r, abs, title);
                y += BAR + GAP;
            }
            y += GROUP_GAP - GAP;
        }
        if !own.is_empty() {
            y = own_start;
            let _ = writeln!(
                out,
                "<text x=\"10\" y=\"{:.0}\" font-size=\"14\" font-weight=\"bold\">fibr's client \
                 and executor, relative to hyper-util (tokio multi-thread) and tokio (lower is \
                 better)</text>",
                y + 4.0
            );
            y += OWN_HEAD;
            grid(&mut out, y - 6.0, y + own_body - GROUP_GAP + 6.0);
            for (title, bars) in &own {
                let _ = writeln!(
                    out,
                    "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\" font-weight=\"bold\">{}</text>",
                    LEFT - 8.0,
                    y + 10.0,
                    xml(title)
                );
                y += OWN_TITLE;
                for (label, color, r, abs) in bars {
                    let _ = writeln!(
                        out,
                        "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                        LEFT - 8.0,
                        y + BAR - 2.5,
                        xml(label)
                    );
                    bar(&mut out, y, color, *r, abs, label);
                    y += BAR + GAP;
                }
                y += GROUP_GAP - GAP;
            }
        }
        out.push_str("</svg>\n");
        out
    }
}
