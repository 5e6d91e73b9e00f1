//! The `--bridge` client: a [`live::Session`] over a livetalk bridge (the protocol of
//! docs/bridge-protocol.md) instead of a direct Live connection, so the engine and the app run
//! unchanged (tools still run locally).
//!
//! Where the protocol says a thing twice, the dedicated message wins: turn ends come from
//! `TURN_COMPLETE`/`INTERRUPTED` and audio from `AUDIO_CHUNK`, so those fields inside a
//! `CONTENT_MESSAGE` are ignored; grounding is read from `CONTENT_MESSAGE`, where the protocol's
//! apps look for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info, warn};

use super::protocol::{AppMessage, BridgeMessage, LiveConfig, LogLevel, RealtimeInputPayload};
use crate::live::close::{describe_http_status, describe_io_error};
use crate::live::events::events_from;
use crate::live::session::{MAX_MESSAGE_BYTES, Outbound, close_info, install_crypto_provider};
use crate::live::wire::{ClientMessage, OUTPUT_SAMPLE_RATE, ServerMessage, Setup};
use crate::live::{CloseInfo, Session, SessionError, SessionEvent, SessionHandle};

const OUTBOUND_CAPACITY: usize = 64;
const EVENT_CAPACITY: usize = 512;

/// Host of a bridge URL for messages (never the token in its query).
pub fn bridge_host(url: &str) -> String {
    url.parse::<Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .unwrap_or_else(|| "the bridge".to_owned())
}

/// Connects to a bridge, sends `CONNECT_GEMINI` with the LiveConfig for `setup` and waits for
/// `SETUP_COMPLETE`. The event stream starts with `SetupComplete`, like a direct session's.
pub async fn connect(
    url: &str,
    setup: &Setup,
    setup_timeout: Duration,
) -> Result<Session, SessionError> {
    install_crypto_provider();
    let host = bridge_host(url);
    let mut request = url
        .into_client_request()
        .map_err(|e| SessionError::Connect(format!("Invalid bridge URL for {host}: {e}")))?;
    request.headers_mut().insert(
        "user-agent",
        HeaderValue::from_static(concat!("livetalk/", env!("CARGO_PKG_VERSION"))),
    );
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
        .write_buffer_size(0);
    info!(bridge = %host, "connecting to bridge");
    let (socket, _response) =
        tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, None)
            .await
            .map_err(|e| connect_error(e, &host))?;
    let (mut sink, mut stream) = socket.split();

    let config = LiveConfig::from_setup(setup);
    let hello = AppMessage::ConnectGemini {
        config,
        ignored_keys: Vec::new(),
    };
    sink.send(Message::text(hello.encode()))
        .await
        .map_err(|e| connect_error(e, &host))?;

    // GEMINI_CONNECTED, then SETUP_COMPLETE; errors before it explain a failed setup.
    let wait = async {
        let mut last_error: Option<String> = None;
        loop {
            let frame = match stream.next().await {
                Some(Ok(Message::Text(text))) => text.as_bytes().to_vec(),
                Some(Ok(Message::Binary(bytes))) => bytes.to_vec(),
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame
                        .map(|f| (Some(u16::from(f.code)), f.reason.to_string()))
                        .unwrap_or((None, String::new()));
                    return Err(SessionError::Closed(socket_closed(
                        code, reason, last_error, false,
                    )));
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(connect_error(e, &host)),
                None => {
                    return Err(SessionError::Closed(socket_closed(
                        None,
                        String::new(),
                        last_error,
                        false,
                    )));
                }
            };
            match BridgeMessage::decode(&frame) {
                Ok(BridgeMessage::SetupComplete(details)) if details.success => return Ok(()),
                Ok(BridgeMessage::SetupComplete(details)) => {
                    let error = details.error.unwrap_or_default();
                    let message = error
                        .message
                        .or(last_error)
                        .unwrap_or_else(|| "the bridge could not set up the session".into());
                    return Err(SessionError::Closed(CloseInfo {
                        code: error.code,
                        reason: message.clone(),
                        message: format!(
                            "The bridge could not start the Gemini session: {message}"
                        ),
                        initiated_by_client: false,
                    }));
                }
                Ok(BridgeMessage::GeminiError { message, .. }) => {
                    warn!("bridge error during setup: {message}");
                    last_error = Some(message);
                }
                Ok(BridgeMessage::GeminiDisconnected { reason }) => {
                    let message = last_error.or(reason).unwrap_or_default();
                    return Err(SessionError::Closed(CloseInfo {
                        code: None,
                        reason: message.clone(),
                        message: format!(
                            "The bridge ended the Gemini session during setup: {message}"
                        ),
                        initiated_by_client: false,
                    }));
                }
                Ok(BridgeMessage::LogMessage { level, message, .. }) => log(level, &message),
                Ok(other) => debug!("bridge message before setup: {}", other.kind()),
                Err(e) => warn!("ignored a bad bridge frame during setup: {e}"),
            }
        }
    };
    tokio::time::timeout(setup_timeout, wait)
        .await
        .map_err(|_| SessionError::SetupTimeout {
            host: host.clone(),
            timeout: setup_timeout,
        })??;
    info!(bridge = %host, "bridge session set up");

    let (handle, mut outbound) = SessionHandle::channel(OUTBOUND_CAPACITY);
    let (events_tx, events_rx) = mpsc::channel(EVENT_CAPACITY);
    let closing = Arc::new(AtomicBool::new(false));

    // Writer: the app's Live messages in the bridge's words.
    let writer_closing = closing.clone();
    tokio::spawn(async move {
        while let Some(item) = outbound.recv().await {
            let message = match item {
                Outbound::Message(message) => app_message(*message),
                Outbound::Close => {
                    writer_closing.store(true, Ordering::SeqCst);
                    AppMessage::DisconnectGemini
                }
            };
            let done = message == AppMessage::DisconnectGemini;
            if let Err(e) = sink.send(Message::text(message.encode())).await {
                debug!("bridge send failed, the reader reports the close: {e}");
                break;
            }
            if done {
                break;
            }
        }
    });

    // Reader: bridge messages become the same events a direct session produces.
    tokio::spawn(async move {
        let events = events_tx;
        if events
            .send(SessionEvent::SetupComplete { session_id: None })
            .await
            .is_err()
        {
            return;
        }
        let mut last_error: Option<(String, Option<u16>)> = None;
        let close = loop {
            let frame = match stream.next().await {
                Some(Ok(Message::Text(text))) => text.as_bytes().to_vec(),
                Some(Ok(Message::Binary(bytes))) => bytes.to_vec(),
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame
                        .map(|f| (Some(u16::from(f.code)), f.reason.to_string()))
                        .unwrap_or((Some(1005), String::new()));
                    break socket_closed(
                        code,
                        reason,
                        last_error.map(|e| e.0),
                        closing.load(Ordering::SeqCst),
                    );
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    debug!("bridge read error: {e}");
                    break socket_closed(
                        None,
                        String::new(),
                        last_error.map(|e| e.0),
                        closing.load(Ordering::SeqCst),
                    );
                }
                None => {
                    break socket_closed(
                        None,
                        String::new(),
                        last_error.map(|e| e.0),
                        closing.load(Ordering::SeqCst),
                    );
                }
            };
            let message = match BridgeMessage::decode(&frame) {
                Ok(message) => message,
                Err(e) => {
                    let reason = format!("skipped a bad bridge message: {e}");
                    warn!("{reason}");
                    if events
                        .send(SessionEvent::FrameSkipped { reason })
                        .await
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
            };
            let decoded = match message {
                BridgeMessage::GeminiDisconnected { reason } => {
                    let by_client = closing.load(Ordering::SeqCst);
                    let (error, code) = last_error.take().unzip();
                    let explained = error.or(reason.clone()).unwrap_or_else(|| {
                        "The bridge ended the Gemini session without a reason.".into()
                    });
                    break CloseInfo {
                        code: code.flatten(),
                        reason: reason.unwrap_or_default(),
                        message: if by_client {
                            "Session ended.".to_owned()
                        } else {
                            explained
                        },
                        initiated_by_client: by_client,
                    };
                }
                BridgeMessage::GeminiError { message, details } => {
                    warn!("bridge error: {message}");
                    let code = details
                        .as_ref()
                        .and_then(|d| d.get("code"))
                        .and_then(|c| c.as_u64())
                        .and_then(|c| u16::try_from(c).ok());
                    last_error = Some((message.clone(), code));
                    // Shown now; if GEMINI_DISCONNECTED follows it also becomes the close reason.
                    vec![SessionEvent::FrameSkipped {
                        reason: format!("The bridge reported an error: {message}"),
                    }]
                }
                other => events_for(other),
            };
            for event in decoded {
                if events.send(event).await.is_err() {
                    return;
                }
            }
        };
        info!(code = ?close.code, "bridge session closed: {}", close.message);
        let _ = events.send(SessionEvent::Closed(close)).await;
    });

    Ok(Session {
        handle,
        events: events_rx,
    })
}

/// A bridge message as session events (errors and disconnects are handled by the reader).
fn events_for(message: BridgeMessage) -> Vec<SessionEvent> {
    match message {
        BridgeMessage::ContentMessage(content) => {
            let mut server_content = content.content;
            server_content.turn_complete = None;
            server_content.interrupted = None;
            if let Some(turn) = &mut server_content.model_turn {
                turn.parts.retain(|p| {
                    !p.inline_data
                        .as_ref()
                        .is_some_and(|b| b.mime_type.starts_with("audio/"))
                });
            }
            events_from(ServerMessage {
                server_content: Some(server_content),
                usage_metadata: content.usage_metadata,
                ..ServerMessage::default()
            })
        }
        BridgeMessage::AudioChunk(pcm) => vec![SessionEvent::ModelAudio {
            pcm,
            sample_rate: OUTPUT_SAMPLE_RATE,
        }],
        BridgeMessage::TurnComplete(details) => vec![SessionEvent::TurnComplete {
            reason: details.reason,
            waiting_for_input: details.waiting_for_input.unwrap_or(false),
        }],
        BridgeMessage::Interrupted => vec![SessionEvent::Interrupted],
        BridgeMessage::ToolCall(call) if !call.function_calls.is_empty() => {
            vec![SessionEvent::ToolCall(call.function_calls)]
        }
        BridgeMessage::ToolCallCancellation(cancel) if !cancel.ids.is_empty() => {
            vec![SessionEvent::ToolCallCancelled(cancel.ids)]
        }
        // After an UPDATE_CONFIG the session is ready again.
        BridgeMessage::SetupComplete(details) if details.success => {
            vec![SessionEvent::SetupComplete { session_id: None }]
        }
        BridgeMessage::LogMessage { level, message, .. } => {
            log(level, &message);
            Vec::new()
        }
        // Status follows the audio itself; grounding is read from CONTENT_MESSAGE.
        other => {
            debug!("bridge message without an event: {}", other.kind());
            Vec::new()
        }
    }
}

/// An app-side Live message in the bridge protocol.
fn app_message(message: ClientMessage) -> AppMessage {
    match message {
        ClientMessage::ClientContent(content) => AppMessage::SendMessage {
            parts: content.turns.into_iter().flat_map(|t| t.parts).collect(),
            turn_complete: content.turn_complete.unwrap_or(true),
        },
        ClientMessage::RealtimeInput(input) => {
            AppMessage::SendRealtimeInput(RealtimeInputPayload {
                input,
                chunks: Vec::new(),
            })
        }
        ClientMessage::ToolResponse(response) => AppMessage::SendToolResponse(response),
        ClientMessage::Setup(setup) => AppMessage::UpdateConfig {
            config: LiveConfig::from_setup(&setup),
            ignored_keys: Vec::new(),
        },
    }
}

fn log(level: LogLevel, message: &str) {
    match level {
        LogLevel::Info => info!("bridge: {message}"),
        LogLevel::Warn => warn!("bridge: {message}"),
        LogLevel::Error => warn!("bridge error: {message}"),
    }
}

/// The bridge's socket ended; the last `GEMINI_ERROR` explains it best when there was one.
/// Otherwise the close reads as a direct session's would, said to come from the bridge.
fn socket_closed(
    code: Option<u16>,
    reason: String,
    last_error: Option<String>,
    initiated_by_client: bool,
) -> CloseInfo {
    let mut close = close_info(code, reason, initiated_by_client);
    if !initiated_by_client {
        close.message = match (last_error, code) {
            (Some(error), _) => error,
            (None, Some(1005)) => {
                "The bridge closed the connection without a status code.".to_owned()
            }
            (None, Some(_)) => format!("Bridge: {}", close.message),
            (None, None) => close.message,
        };
    }
    close
}

fn connect_error(error: tungstenite::Error, host: &str) -> SessionError {
    match error {
        tungstenite::Error::Http(response) => {
            let status = response.status().as_u16();
            let message = match status {
                401 => format!(
                    "The bridge at {host} wants a token (HTTP 401): add ?token=... to the --bridge URL."
                ),
                403 => format!("The bridge at {host} refused this connection (HTTP 403)."),
                _ => describe_http_status(status, host),
            };
            SessionError::Rejected { status, message }
        }
        tungstenite::Error::Io(e) => SessionError::Connect(describe_io_error(&e, host)),
        other => SessionError::Connect(format!(
            "Could not connect to the bridge at {host}: {other}"
        )),
    }
}
