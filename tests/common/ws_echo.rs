//! The WebSocket echo the WebSocket-over-HTTP/2 and HTTP/3 tests serve (feature `ws`).

use fibr::ws::{CloseFrame, Message, WebSocket};

/// Every text and binary message back; a text "close" closes with 4000 "bye".
pub async fn echo(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        let reply = match msg {
            Message::Text(t) if t == "close" => Message::Close(Some(CloseFrame {
                code: 4000,
                reason: "bye".into(),
            })),
            Message::Text(_) | Message::Binary(_) => msg,
            _ => continue,
        };
        if socket.send(reply).await.is_err() {
            return;
        }
    }
}
