//! A far end scripted by hand: a `ws://` URL on loopback and the one WebSocket connection
//! accepted on it, for tests of how a client copes with frames the mock would never send (a
//! server that stalls, closes mid-setup, or answers in another protocol).

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;

/// The server side of the one connection: read what the client sent, write what the test
/// wants it to hear.
pub type FarEnd = WebSocketStream<TcpStream>;

/// Listens on a free loopback port: the `ws://host:port` URL to dial, and the far end of the
/// first connection once its WebSocket upgrade is done.
pub async fn listen() -> std::io::Result<(String, JoinHandle<std::io::Result<FarEnd>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("ws://{}", listener.local_addr()?);
    let accepted = tokio::spawn(async move {
        let (stream, _) = listener.accept().await?;
        tokio_tungstenite::accept_async(stream)
            .await
            .map_err(std::io::Error::other)
    });
    Ok((url, accepted))
}
