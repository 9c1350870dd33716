//! fibr's WebSocket client against the Autobahn testsuite's `fuzzingserver` (`.ci/autobahn`):
//! runs every case as an echo client, then asks the server to write its reports.
//!
//! `cargo run --release --example ws_autobahn_client --features ws` (the fuzzingserver on
//! 127.0.0.1:9001; `AUTOBAHN` overrides the address).

use fibr::ws::{Config, Connector, DeflateConfig, Message};

fn main() -> Result<(), fibr::ws::Error> {
    let base = std::env::var("AUTOBAHN").unwrap_or_else(|_| "ws://127.0.0.1:9001".into());
    fibr::run(async move {
        let (mut socket, _) = fibr::ws::connect(&format!("{base}/getCaseCount")).await?;
        let count: u32 = match socket.recv().await {
            Some(Ok(Message::Text(t))) => t.parse().unwrap_or(0),
            other => panic!("no case count: {other:?}"),
        };
        drop(socket);
        let connector = Connector::new().config(Config {
            deflate: Some(DeflateConfig::default()),
            ..Config::default()
        });
        for case in 1..=count {
            let url = format!("{base}/runCase?case={case}&agent=fibr");
            let Ok((mut socket, _)) = connector.connect(&url).await else {
                continue;
            };
            while let Some(Ok(msg)) = socket.recv().await {
                if matches!(msg, Message::Text(_) | Message::Binary(_))
                    && socket.send(msg).await.is_err()
                {
                    break;
                }
            }
        }
        let (mut socket, _) =
            fibr::ws::connect(&format!("{base}/updateReports?agent=fibr")).await?;
        while socket.recv().await.is_some() {}
        Ok(())
    })
}
