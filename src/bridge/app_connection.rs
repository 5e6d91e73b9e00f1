//! One app's connection to the bridge, over any [`Transport`]: the session loop. It reads the
//! app's messages, has the [`Translator`] say what they come to, opens and feeds the app's
//! upstream Live session (supervised, so a goAway or a dropped connection resumes instead of
//! ending it), and sends back what the translator makes of the session's news, until either
//! side ends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{debug, info};

use super::live_config::MappedConfig;
use super::protocol::{AppMessage, BridgeMessage};
use super::translator::{SessionStep, Translator};
use super::transport::{Received, Transport};
use livetalk_live::Outbox;
use livetalk_live::session::{self, ReconnectPolicy, SessionEvent, SessionHandle};
use livetalk_live::wire::ClientMessage;
use livetalk_live::{ApiKey, ConnectError, ConnectOptions, Endpoint};

/// Where each client's Live session goes. `Debug` never shows the key.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub endpoint: Endpoint,
    pub api_key: Option<ApiKey>,
    pub connect_timeout: Duration,
}

/// What every app connection of one bridge shares.
pub(super) struct Shared {
    pub(super) upstream: Upstream,
    pub(super) token: Option<String>,
    pub(super) max_message_bytes: usize,
}

/// The upstream Live session of one app, on the reconnect supervisor.
struct Live {
    handle: SessionHandle,
    events: mpsc::Receiver<SessionEvent>,
    status: session::SessionStatus,
}

enum Incoming {
    App(Received),
    Live(Option<SessionEvent>),
}

/// Runs one app's connection to its end.
pub(super) async fn run<T: Transport>(shared: Arc<Shared>, peer: SocketAddr, transport: T) {
    SessionLoop {
        shared,
        peer,
        transport,
        translator: Translator::new(),
        live: None,
        app_gone: false,
    }
    .run()
    .await
}

struct SessionLoop<T> {
    shared: Arc<Shared>,
    peer: SocketAddr,
    transport: T,
    translator: Translator,
    /// Open exactly when the translator says a session is.
    live: Option<Live>,
    /// A send failed: the loop ends after this step.
    app_gone: bool,
}

impl<T: Transport> SessionLoop<T> {
    async fn run(mut self) {
        loop {
            // What the service sent and the session's own news come as one stream, in order.
            let incoming = match self.live.as_mut() {
                Some(live) => {
                    tokio::select! {
                        event = live.events.recv() => Incoming::Live(event),
                        received = self.transport.receive() => Incoming::App(received),
                    }
                }
                None => Incoming::App(self.transport.receive().await),
            };
            let end = match incoming {
                Incoming::App(Received::Message(message)) => self.on_app_message(*message).await,
                Incoming::App(Received::Refused(sentence)) => {
                    self.send(BridgeMessage::error(sentence)).await;
                    false
                }
                Incoming::App(Received::Ended { last_words }) => {
                    if let Some(sentence) = last_words {
                        self.send(BridgeMessage::error(sentence)).await;
                    }
                    true
                }
                Incoming::Live(Some(event)) => {
                    let out = self.translator.session_event(event);
                    self.send_all(out).await;
                    if !self.translator.is_open() {
                        // It closed for good (its last words were among `out`).
                        self.live = None;
                    }
                    false
                }
                Incoming::Live(None) => {
                    // The reader ended without a Closed event (it always sends one; defensive).
                    self.live = None;
                    self.translator.session_lost();
                    false
                }
            };
            if end || self.app_gone {
                break;
            }
        }
        self.transport.close().await;
        if let Some(live) = self.live.take() {
            live.handle.close().await;
        }
    }

    async fn send(&mut self, message: BridgeMessage) {
        if self.app_gone {
            return;
        }
        if let BridgeMessage::GeminiError { message: text, .. } = &message {
            debug!(peer = %self.peer, "GEMINI_ERROR: {text}");
        }
        if !self.transport.send(&message).await {
            self.app_gone = true;
        }
    }

    async fn send_all(&mut self, messages: impl IntoIterator<Item = BridgeMessage>) {
        for message in messages {
            self.send(message).await;
        }
    }

    async fn forward(&mut self, message: ClientMessage) {
        if let Some(live) = &self.live
            && live.handle.send(message).await.is_err()
        {
            // The reader reports the close with its reason; nothing to add here.
            debug!(peer = %self.peer, "upstream closed while forwarding");
        }
    }

    /// One app message, as the translator says; `true` when the connection ends.
    async fn on_app_message(&mut self, message: AppMessage) -> bool {
        let reply = self.translator.app(message);
        self.send_all(reply.to_app).await;
        for message in reply.to_live {
            self.forward(message).await;
        }
        match reply.session {
            None => false,
            Some(SessionStep::Open(mapped)) => {
                self.open(mapped, None).await;
                false
            }
            Some(SessionStep::Reopen(mapped)) => {
                let handle = self.live.as_ref().and_then(|l| l.status.resume_handle());
                let (note, resume) = self.translator.reopening(&mapped, handle);
                self.send(note).await;
                if let Some(old) = self.live.take() {
                    old.handle.close().await;
                }
                self.open(mapped, resume).await;
                false
            }
            Some(SessionStep::Disconnect { farewell }) => {
                if let Some(live) = self.live.take() {
                    live.handle.close().await;
                }
                self.send(farewell).await;
                true
            }
        }
    }

    /// Opens the upstream session for a checked config, resuming `resume` when given, and puts
    /// it under the reconnect supervisor. The outcome reaches the app as `SETUP_COMPLETE`
    /// (from the session's first event) or the translator's failed setup.
    async fn open(&mut self, mapped: MappedConfig, resume: Option<String>) {
        let (warnings, setup) = self.translator.opening(mapped, resume);
        self.send_all(warnings).await;
        let model = setup.model.clone();
        let upstream = &self.shared.upstream;
        let options = ConnectOptions {
            endpoint: upstream.endpoint.clone(),
            auth: upstream.api_key.clone().into(),
            setup,
            connect_timeout: upstream.connect_timeout,
        };
        match livetalk_live::client::connect(options.clone()).await {
            Ok(connection) => {
                info!(peer = %self.peer, %model, "upstream session open");
                let supervised = session::supervise(
                    connection,
                    Some(options.into()),
                    ReconnectPolicy::default(),
                    None,
                );
                self.live = Some(Live {
                    handle: supervised.handle,
                    events: supervised.events,
                    status: supervised.status,
                });
                self.translator.opened();
            }
            Err(e) => {
                let code = match &e {
                    ConnectError::Closed(info) => info.code,
                    ConnectError::Rejected { status, .. } => Some(*status),
                    _ => None,
                };
                let message = e.to_string();
                info!(peer = %self.peer, "upstream session failed: {message}");
                let out = self.translator.setup_failed(code, message);
                self.send_all(out).await;
            }
        }
    }
}
