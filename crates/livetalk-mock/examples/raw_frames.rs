//! Drives the mock with raw JSON frames, the way a client in any language would: `setup` with
//! one function, a text turn the demo model answers with a call of it, the `toolResponse`, and
//! the reply to its `turnComplete`. Every wait is bounded; the exit code says whether it worked.
//!
//! ```text
//! cargo run -p livetalk-mock --example raw_frames
//! ```

// An example speaks on the terminal; no secret passes through it (the key is a placeholder).
#![allow(clippy::disallowed_macros)]

use std::process::ExitCode;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use livetalk_mock::{MockOptions, MockServer};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The longest any one step may take.
const WAIT: Duration = Duration::from_secs(10);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(reply) => {
            println!("the model said: {reply}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("raw_frames failed: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<String, String> {
    // A free port on loopback; replies stream 20 times faster than they would be spoken.
    let server = MockServer::start(MockOptions {
        speed: 20.0,
        ..MockOptions::loopback()
    })
    .await
    .map_err(|e| e.to_string())?;
    // The path and key placement of the official SDKs; the mock takes any key.
    let url = format!(
        "{}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=any-key",
        server.base_url()
    );
    println!("connecting to {}", server.base_url());
    let (mut socket, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .map_err(|_| "no WebSocket upgrade within 10 s".to_owned())?
        .map_err(|e| format!("cannot connect: {e}"))?;

    send(
        &mut socket,
        json!({"setup": {
            "model": "models/gemini-3.8-live",
            "generationConfig": {"responseModalities": ["TEXT"]},
            "tools": [{"functionDeclarations": [{
                "name": "get_device_status",
                "description": "Reads the state of a smart-home device.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"device_name": {"type": "STRING"}},
                    "required": ["device_name"]
                }
            }]}]
        }}),
    )
    .await?;
    receive_until(&mut socket, "setupComplete", |frame| {
        frame.get("setupComplete").is_some()
    })
    .await?;

    send(
        &mut socket,
        json!({"clientContent": {
            "turns": [{"role": "user", "parts": [{"text": "Is the living room lamp on?"}]}],
            "turnComplete": true
        }}),
    )
    .await?;
    let frame = receive_until(&mut socket, "toolCall", |frame| {
        frame.get("toolCall").is_some()
    })
    .await?;
    let call = &frame["toolCall"]["functionCalls"][0];
    let (Some(id), Some(name)) = (call["id"].as_str(), call["name"].as_str()) else {
        return Err(format!("a toolCall without an id and a name: {frame}"));
    };
    println!("   call {id}: {name}({})", call["args"]);

    send(
        &mut socket,
        json!({"toolResponse": {"functionResponses": [{
            "id": id,
            "name": name,
            "response": {"status": "on", "brightness": 80, "color": "warm white"}
        }]}}),
    )
    .await?;
    let mut reply = String::new();
    loop {
        let frame = receive(&mut socket, "turnComplete").await?;
        let content = &frame["serverContent"];
        for part in content["modelTurn"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(text) = part["text"].as_str() {
                reply.push_str(text);
            }
        }
        if content["turnComplete"] == json!(true) {
            break;
        }
    }

    println!("-> close");
    socket
        .close(None)
        .await
        .map_err(|e| format!("cannot close: {e}"))?;
    // The server answers the close; reading on until the stream ends lets that arrive.
    tokio::time::timeout(WAIT, async {
        while let Some(Ok(_)) = socket.next().await {}
    })
    .await
    .map_err(|_| "the server did not answer the close within 10 s".to_owned())?;
    if reply.is_empty() {
        return Err("the reply had no text".to_owned());
    }
    Ok(reply)
}

/// Sends one client message as a text frame, as the official SDKs do.
async fn send(socket: &mut Socket, message: Value) -> Result<(), String> {
    println!("-> {}", kind(&message));
    tokio::time::timeout(WAIT, socket.send(Message::text(message.to_string())))
        .await
        .map_err(|_| "could not send within 10 s".to_owned())?
        .map_err(|e| format!("cannot send: {e}"))
}

/// Reads frames until one satisfies `wanted`, and returns it.
async fn receive_until(
    socket: &mut Socket,
    waiting_for: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    loop {
        let frame = receive(socket, waiting_for).await?;
        if wanted(&frame) {
            return Ok(frame);
        }
    }
}

/// Reads the next server message. The service (and the mock) sends JSON in binary frames.
async fn receive(socket: &mut Socket, waiting_for: &str) -> Result<Value, String> {
    loop {
        let next = tokio::time::timeout(WAIT, socket.next())
            .await
            .map_err(|_| format!("no {waiting_for} within 10 s"))?;
        let payload = match next {
            Some(Ok(Message::Binary(bytes))) => bytes.to_vec(),
            Some(Ok(Message::Text(text))) => text.as_bytes().to_vec(),
            Some(Ok(Message::Close(frame))) => {
                return Err(format!("the server closed before {waiting_for}: {frame:?}"));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(format!("reading failed before {waiting_for}: {e}")),
            None => return Err(format!("the connection ended before {waiting_for}")),
        };
        let frame: Value = serde_json::from_slice(&payload)
            .map_err(|e| format!("a frame that is not JSON: {e}"))?;
        println!("<- {}", kind(&frame));
        return Ok(frame);
    }
}

/// A message's kind: its top-level keys, and for `serverContent` the fields it carries.
fn kind(message: &Value) -> String {
    let Some(object) = message.as_object() else {
        return "(not an object)".to_owned();
    };
    object
        .iter()
        .map(|(key, value)| match (key.as_str(), value.as_object()) {
            ("serverContent", Some(fields)) if !fields.is_empty() => {
                let fields: Vec<&str> = fields.keys().map(String::as_str).collect();
                format!("serverContent({})", fields.join(", "))
            }
            _ => key.clone(),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}
