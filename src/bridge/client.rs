//! The `--bridge` client: a [`Connection`] over a bridge (`livetalk serve`, or any server speaking
//! the protocol of docs/bridge-protocol.md) instead of a direct Live connection, so the engine
//! and the app run unchanged (tools still run locally). The connection runner does the rest;
//! this is the bridge's side.
//!
//! Where the protocol says a thing twice, the dedicated message wins: turn ends come from
//! `TURN_COMPLETE`/`INTERRUPTED` and audio from `AUDIO_CHUNK`, so those fields inside a
//! `CONTENT_MESSAGE` are ignored; grounding is read from `CONTENT_MESSAGE`, where the bridge's
//! other clients look for it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info, warn};

use tokio::sync::mpsc;

use super::client_track::{self, Signal, model_audio};
use super::live_config::LiveConfig;
use super::protocol::{AppMessage, BridgeMessage, LogLevel, RealtimeInputPayload, Resume};
use super::translator::DRAIN_CLOSE_CODE;
use crate::config::{BridgeTransport, bridge_host};
use livetalk_live::close::describe_http_status;
use livetalk_live::connection::{self, Protocol, Read, SetupStep, close_info};
use livetalk_live::connection::{TappedFrame, WireTap};
use livetalk_live::events::Inbound;
use livetalk_live::excerpt::{SUMMARY, bounded};
use livetalk_live::session::Dialer;
use livetalk_live::wire::{
    ClientMessage, GoAway, ServerContent, ServerMessage, SessionResumptionUpdate, Setup,
    SetupComplete, ToolCall, ToolCallCancellation,
};
use livetalk_live::{CloseInfo, ConnectError, Connection, ServerEvent};

/// The URL with `/` as its path when it has none: `ws://host:3001?token=T` (as people write
/// it) would otherwise put `?token=T` where the request line wants a path.
fn with_root_path(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if rest[authority_end..].starts_with('/') {
        return url.to_owned();
    }
    format!(
        "{scheme}://{}/{}",
        &rest[..authority_end],
        &rest[authority_end..]
    )
}

/// Connects to a bridge, sends `CONNECT_GEMINI` with the LiveConfig for `setup` and waits for
/// `SETUP_COMPLETE`. The event stream starts with `SetupComplete`, like a direct session's.
pub async fn connect(
    url: &str,
    setup: &Setup,
    connect_timeout: Duration,
) -> Result<Connection, ConnectError> {
    connect_tapped(url, setup, connect_timeout, None).await
}

/// [`connect`], with the attempt, what is sent, the Live messages the bridge's stand for and
/// the close shown to `tap` (a recording of a bridged session reads like a direct one's).
pub async fn connect_tapped(
    url: &str,
    setup: &Setup,
    connect_timeout: Duration,
    tap: Option<Arc<dyn WireTap>>,
) -> Result<Connection, ConnectError> {
    connect_over(url, setup, connect_timeout, tap, BridgeTransport::WebSocket).await
}

/// [`connect_tapped`], with the voice over `transport`: on [`BridgeTransport::WebRtc`] the
/// connection offers a peer connection once set up and moves the voice onto its track while
/// it is up (`client_track`).
pub async fn connect_over(
    url: &str,
    setup: &Setup,
    connect_timeout: Duration,
    tap: Option<Arc<dyn WireTap>>,
    transport: BridgeTransport,
) -> Result<Connection, ConnectError> {
    // The token rides in the URL's query; nothing livetalk writes may show it.
    livetalk_live::redact::remember_url_credentials(url);
    let sends_token = url
        .split_once('?')
        .map(|(_, query)| query.split(['&', '#']))
        .into_iter()
        .flatten()
        .any(|pair| pair.strip_prefix("token=").is_some_and(|t| !t.is_empty()));
    let (signals_tx, signals) = match transport {
        BridgeTransport::WebSocket => (None, None),
        BridgeTransport::WebRtc => {
            let (tx, rx) = mpsc::channel(client_track::SIGNAL_QUEUE);
            (Some(tx), Some(rx))
        }
    };
    let bridge = Bridge {
        url: url.to_owned(),
        host: bridge_host(url),
        sends_token,
        last_error: None,
        signals: signals_tx,
    };
    let connection = connection::run(bridge, setup, connect_timeout, tap.clone()).await?;
    let Some(signals) = signals else {
        return Ok(connection);
    };
    let address = bridge_address(url).await;
    Ok(client_track::relay(
        connection,
        signals,
        address,
        connect_timeout,
        tap,
    ))
}

/// The bridge's socket address, for the host candidate that routes to it.
async fn bridge_address(url: &str) -> Option<std::net::SocketAddr> {
    let request = with_root_path(url).into_client_request().ok()?;
    let uri = request.uri();
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("wss") {
            443
        } else {
            80
        });
    tokio::net::lookup_host((host, port)).await.ok()?.next()
}

/// Opens the terminal's connections to a bridge (`livetalk --bridge`): a session that loses
/// its bridge connection opens another, as a direct session opens another to the service.
pub struct BridgeDialer {
    /// The bridge's URL, its token included (remembered as a secret).
    pub url: String,
    /// How the voice travels (`--bridge-transport`).
    pub transport: BridgeTransport,
}

impl Dialer for BridgeDialer {
    fn dial(
        &self,
        setup: Setup,
        connect_timeout: Duration,
        tap: Option<Arc<dyn WireTap>>,
    ) -> BoxFuture<'static, Result<Connection, ConnectError>> {
        let (url, transport) = (self.url.clone(), self.transport);
        Box::pin(async move { connect_over(&url, &setup, connect_timeout, tap, transport).await })
    }
}

/// The bridge's side of a connection: `CONNECT_GEMINI` → `SETUP_COMPLETE`, then bridge
/// messages as the same events a direct session produces.
struct Bridge {
    url: String,
    host: String,
    /// The URL carries a `token`: a 401 then means a wrong one, not a missing one.
    sends_token: bool,
    /// The last `GEMINI_ERROR` and its code: it explains a close that follows.
    last_error: Option<(String, Option<u16>)>,
    /// On the WebRTC transport: where the bridge's signalling goes (the answer, its errors
    /// about WebRTC), to the relay that owns the peer connection.
    signals: Option<mpsc::Sender<Signal>>,
}

impl Protocol for Bridge {
    const PEER: &'static str = "bridge";

    fn host(&self) -> &str {
        &self.host
    }

    fn request(&self) -> Result<Request, ConnectError> {
        with_root_path(&self.url)
            .into_client_request()
            .map_err(|e| {
                ConnectError::Connect(format!("Invalid bridge URL for {}: {e}", self.host))
            })
    }

    /// The session's handle, when the setup resumes one, goes as `CONNECT_GEMINI`'s `handle`:
    /// the bridge (this instance or another in front of the same service) resumes it.
    fn opening(setup: &Setup) -> Message {
        let hello = AppMessage::ConnectGemini {
            config: LiveConfig::from_setup(setup),
            ignored_keys: Vec::new(),
            resume: Resume {
                handle: setup
                    .session_resumption
                    .as_ref()
                    .and_then(|r| r.handle.clone()),
                session_handles: true,
            },
        };
        Message::text(hello.encode())
    }

    /// `GEMINI_CONNECTED`, then `SETUP_COMPLETE`; errors before it explain a failed setup.
    fn setup_frame(&mut self, payload: &[u8], tap: Option<&dyn WireTap>) -> SetupStep {
        match BridgeMessage::decode(payload) {
            Ok(BridgeMessage::SetupComplete(details)) if details.success => {
                // An error the bridge recovered from explains nothing that comes later.
                self.last_error = None;
                if let Some(tap) = tap {
                    let answer = ServerMessage {
                        setup_complete: Some(SetupComplete { session_id: None }),
                        ..ServerMessage::default()
                    };
                    tap.handshake(TappedFrame::Message(&answer), payload.len());
                }
                return SetupStep::Done { session_id: None };
            }
            Ok(BridgeMessage::SetupComplete(details)) => {
                let error = details.error.unwrap_or_default();
                let message = error
                    .message
                    .or_else(|| self.last_error.take().map(|(message, _)| message))
                    .unwrap_or_else(|| "the bridge could not set up the session".into());
                return SetupStep::Failed(CloseInfo {
                    code: error.code,
                    reason: message.clone(),
                    message: format!("The bridge could not start the Gemini session: {message}"),
                    initiated_by_client: false,
                });
            }
            Ok(BridgeMessage::GeminiError { message, .. }) => {
                warn!("bridge error during setup: {}", bounded(&message, SUMMARY));
                self.last_error = Some((message, None));
            }
            Ok(BridgeMessage::GeminiDisconnected { reason, .. }) => {
                let error = self.last_error.take().map(|(message, _)| message);
                let message = error.or(reason).unwrap_or_default();
                return SetupStep::Failed(CloseInfo {
                    code: None,
                    reason: message.clone(),
                    message: format!("The bridge ended the Gemini session during setup: {message}"),
                    initiated_by_client: false,
                });
            }
            Ok(BridgeMessage::LogMessage { level, message, .. }) => log(level, &message),
            Ok(other) => debug!("bridge message before setup: {}", other.kind()),
            Err(e) => warn!(
                "ignored a bad bridge frame during setup: {}",
                bounded(&e.to_string(), SUMMARY)
            ),
        }
        SetupStep::Wait
    }

    /// The app's Live messages in the bridge's words.
    fn encode(message: &ClientMessage) -> Message {
        Message::text(app_message(message.clone()).encode())
    }

    fn farewell() -> Message {
        Message::text(AppMessage::DisconnectGemini.encode())
    }

    /// A bridge message that stands for a Live message comes as that message, so the session,
    /// its recording and its inspector read a bridged session like a direct one.
    fn frame(&mut self, payload: &[u8], closing: bool) -> Read {
        let message = match BridgeMessage::decode(payload) {
            Ok(message) => message,
            Err(e) => {
                let reason = format!("skipped a bad bridge message: {e}");
                warn!("{}", bounded(&reason, SUMMARY));
                return Read::Inbound(Inbound::news(ServerEvent::FrameSkipped { reason }));
            }
        };
        match message {
            // The instance is draining and closes this connection next (1012): read as the
            // goAway it stands for, so the session moves to a new connection (through the
            // load balancer, to another instance) at once, resuming with the handle it was
            // just told.
            BridgeMessage::GeminiDisconnected {
                reason,
                code: Some(DRAIN_CLOSE_CODE),
            } if !closing => {
                info!(
                    "bridge: {}",
                    bounded(reason.as_deref().unwrap_or_default(), SUMMARY)
                );
                self.last_error = None;
                Read::Inbound(Inbound::message(ServerMessage {
                    go_away: Some(GoAway {
                        time_left: Some(Duration::ZERO),
                    }),
                    ..ServerMessage::default()
                }))
            }
            BridgeMessage::GeminiDisconnected { reason, .. } => {
                let (error, code) = self.last_error.take().unzip();
                let explained = error.or(reason.clone()).unwrap_or_else(|| {
                    "The bridge ended the Gemini session without a reason.".into()
                });
                Read::End(CloseInfo {
                    code: code.flatten(),
                    reason: reason.unwrap_or_default(),
                    message: if closing {
                        "Session ended.".to_owned()
                    } else {
                        explained
                    },
                    initiated_by_client: closing,
                })
            }
            BridgeMessage::WebrtcAnswer(answer) => {
                if let Some(signals) = &self.signals {
                    let _ = signals.try_send(Signal::Answer(answer.sdp));
                }
                Read::Inbound(nothing())
            }
            // The bridge's WebRTC errors all name it; the relay gives the one warning.
            BridgeMessage::GeminiError { message, .. }
                if self.signals.is_some() && message.contains("WebRTC") =>
            {
                debug!("bridge WebRTC error: {}", bounded(&message, SUMMARY));
                if let Some(signals) = &self.signals {
                    let _ = signals.try_send(Signal::Refused(message));
                }
                Read::Inbound(nothing())
            }
            BridgeMessage::GeminiError { message, details } => {
                warn!("bridge error: {}", bounded(&message, SUMMARY));
                let code = details
                    .as_ref()
                    .and_then(|d| d.get("code"))
                    .and_then(|c| c.as_u64())
                    .and_then(|c| u16::try_from(c).ok());
                let shown = format!("The bridge reported an error: {message}");
                // Shown now; if GEMINI_DISCONNECTED follows it also becomes the close reason.
                self.last_error = Some((message, code));
                Read::Inbound(Inbound::news(ServerEvent::FrameSkipped { reason: shown }))
            }
            other => match live_message(other) {
                Some(message) => Read::Inbound(Inbound::message(message)),
                // Nothing the session needs (the runner passes on no empty frame).
                None => Read::Inbound(nothing()),
            },
        }
    }

    /// The last `GEMINI_ERROR` explains a socket close best when there was one. Otherwise
    /// the close reads as a direct session's would, said to come from the bridge.
    fn socket_closed(&mut self, code: Option<u16>, reason: String, by_client: bool) -> CloseInfo {
        let mut close = close_info(code, reason, by_client);
        if !by_client {
            close.message = match (self.last_error.take(), code) {
                (Some((error, _)), _) => error,
                (None, Some(1005)) => {
                    "The bridge closed the connection without a status code.".to_owned()
                }
                (None, Some(_)) => format!("Bridge: {}", close.message),
                (None, None) => close.message,
            };
        }
        close
    }

    fn rejected(&self, status: u16) -> String {
        let host = &self.host;
        match status {
            401 if self.sends_token => format!(
                "The bridge at {host} did not accept the token in the --bridge URL (HTTP 401): \
                 use the token `livetalk serve` printed when it started."
            ),
            401 => format!(
                "The bridge at {host} wants a token (HTTP 401): add ?token=... to the --bridge URL."
            ),
            403 => format!("The bridge at {host} refused this connection (HTTP 403)."),
            _ => describe_http_status(status, host),
        }
    }

    fn unreachable(&self, error: tungstenite::Error) -> String {
        format!("Could not connect to the bridge at {}: {error}", self.host)
    }
}

/// The Live API message a bridge message stands for, as the service would have sent it (errors
/// and disconnects are handled by the reader); `None` for what says nothing to the session.
fn live_message(message: BridgeMessage) -> Option<ServerMessage> {
    let content = |server_content| ServerMessage {
        server_content: Some(server_content),
        ..ServerMessage::default()
    };
    Some(match message {
        BridgeMessage::ContentMessage { server_content } => {
            let content = *server_content;
            let mut server_content = content.content;
            // TURN_COMPLETE says these (the status with it), INTERRUPTED that, and the audio
            // comes as AUDIO_CHUNK.
            if server_content.turn_complete.take() == Some(true) {
                server_content.interaction_status = None;
                server_content.turn_complete_reason = None;
                server_content.waiting_for_input = None;
            }
            server_content.interrupted = None;
            if let Some(turn) = &mut server_content.model_turn {
                turn.parts.retain(|p| {
                    !p.inline_data
                        .as_ref()
                        .is_some_and(|b| b.mime_type.starts_with("audio/"))
                });
            }
            ServerMessage {
                server_content: Some(server_content),
                usage_metadata: content.usage_metadata,
                ..ServerMessage::default()
            }
        }
        BridgeMessage::AudioChunk { data } => model_audio(data),
        BridgeMessage::TurnComplete(details) => content(ServerContent {
            turn_complete: Some(true),
            turn_complete_reason: details.reason,
            waiting_for_input: details.waiting_for_input,
            interaction_status: details.interaction_status,
            ..ServerContent::default()
        }),
        BridgeMessage::Interrupted {} => content(ServerContent {
            interrupted: Some(true),
            ..ServerContent::default()
        }),
        BridgeMessage::ToolCall { tool_call } if !tool_call.function_calls.is_empty() => {
            ServerMessage {
                tool_call: Some(ToolCall {
                    function_calls: tool_call.function_calls,
                }),
                ..ServerMessage::default()
            }
        }
        BridgeMessage::ToolCallCancellation {
            tool_call_cancellation,
        } if !tool_call_cancellation.ids.is_empty() => ServerMessage {
            tool_call_cancellation: Some(ToolCallCancellation {
                ids: tool_call_cancellation.ids,
            }),
            ..ServerMessage::default()
        },
        BridgeMessage::VoiceActivity {
            voice_activity,
            voice_activity_detection_signal,
        } => ServerMessage {
            voice_activity,
            voice_activity_detection_signal,
            ..ServerMessage::default()
        },
        // After an UPDATE_CONFIG the session is ready again.
        BridgeMessage::SetupComplete(details) if details.success => ServerMessage {
            setup_complete: Some(SetupComplete { session_id: None }),
            ..ServerMessage::default()
        },
        BridgeMessage::LogMessage { level, message, .. } => {
            log(level, &message);
            return None;
        }
        // The session's newest handle, kept by the session for its next connection.
        BridgeMessage::SessionHandle { handle } => ServerMessage {
            session_resumption_update: Some(SessionResumptionUpdate {
                resumable: Some(handle.is_some()),
                new_handle: handle,
                ..SessionResumptionUpdate::default()
            }),
            ..ServerMessage::default()
        },
        // Status follows the audio itself; grounding is read from CONTENT_MESSAGE.
        other => {
            debug!("bridge message without an event: {}", other.kind());
            return None;
        }
    })
}

/// A frame that says nothing to the session (the runner passes on no empty frame).
fn nothing() -> Inbound {
    Inbound {
        message: None,
        audio: Vec::new(),
        events: Vec::new(),
        at: std::time::Instant::now(),
        bytes: 0,
        held: None,
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
        ClientMessage::ContextUpdate(update) => AppMessage::ContextUpdate(update),
        ClientMessage::Setup(setup) => AppMessage::UpdateConfig {
            config: LiveConfig::from_setup(&setup),
            ignored_keys: Vec::new(),
        },
    }
}

fn log(level: LogLevel, message: &str) {
    let message = bounded(message, SUMMARY);
    match level {
        LogLevel::Info => info!("bridge: {message}"),
        LogLevel::Warn => warn!("bridge: {message}"),
        LogLevel::Error => warn!("bridge error: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::with_root_path;

    #[test]
    fn a_url_without_a_path_gets_the_root_path() {
        assert_eq!(
            with_root_path("ws://127.0.0.1:3001?token=T"),
            "ws://127.0.0.1:3001/?token=T"
        );
        assert_eq!(with_root_path("ws://host:3001"), "ws://host:3001/");
        assert_eq!(with_root_path("ws://host/x?token=T"), "ws://host/x?token=T");
        assert_eq!(with_root_path("not a url"), "not a url");
    }
}
