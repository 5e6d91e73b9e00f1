//! One app's connection to the bridge, over any [`Transport`]: the session loop. It reads the
//! app's messages, has the [`Translator`] say what they come to, opens and feeds the app's
//! upstream Live session (supervised, so a goAway or a dropped connection resumes instead of
//! ending it), and sends back what the translator makes of the session's news, until either
//! side ends. An app that offers WebRTC gets a peer connection beside its transport: the
//! track's audio goes upstream as the microphone's would, and the model's audio goes out on
//! the track as well as in `AUDIO_CHUNK`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{debug, info};

use super::live_config::MappedConfig;
use super::protocol::{AppMessage, BridgeMessage, WebrtcSdp};
use super::translator::{MediaStep, SessionStep, Translator};
use super::transport::{Received, Transport};
use super::webrtc::{MediaHub, MediaPeer, PeerEvent, signal};
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
    /// The WebRTC transport, when the bridge could bind its UDP port.
    pub(super) media: Option<MediaHub>,
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
    Media(Option<PeerEvent>),
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
        media: None,
        held: Vec::new(),
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
    /// The app's WebRTC peer connection, once it has offered one.
    media: Option<MediaPeer>,
    /// WebRTC signalling that came before the session was set up (bounded: a later offer
    /// replaces all of it).
    held: Vec<MediaStep>,
}

impl<T: Transport> SessionLoop<T> {
    async fn run(mut self) {
        loop {
            // What the service sent and the session's own news come as one stream, in order.
            let (has_live, has_media) = (self.live.is_some(), self.media.is_some());
            let (live, media) = (&mut self.live, &mut self.media);
            let incoming = tokio::select! {
                event = async { live.as_mut()?.events.recv().await }, if has_live => {
                    Incoming::Live(event)
                }
                event = async { media.as_mut()?.next().await }, if has_media => {
                    Incoming::Media(event)
                }
                received = self.transport.receive() => Incoming::App(received),
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
                    self.to_track(&out);
                    self.send_all(out).await;
                    if !self.translator.is_open() {
                        // It closed for good (its last words were among `out`).
                        self.live = None;
                        self.end_media();
                    } else if self.translator.is_ready() && !self.held.is_empty() {
                        for step in std::mem::take(&mut self.held) {
                            self.media_step(step).await;
                        }
                    }
                    false
                }
                Incoming::Media(event) => {
                    self.on_media_event(event).await;
                    false
                }
                Incoming::Live(None) => {
                    // The reader ended without a Closed event (it always sends one; defensive).
                    self.live = None;
                    self.translator.session_lost();
                    self.end_media();
                    false
                }
            };
            if end || self.app_gone {
                break;
            }
        }
        self.end_media();
        self.transport.close().await;
        if let Some(live) = self.live.take() {
            live.handle.close().await;
        }
    }

    /// The model's audio, its interruptions and turn ends, for the WebRTC track when there is
    /// one (what goes to the app over the transport is unchanged).
    fn to_track(&self, out: &[BridgeMessage]) {
        let Some(peer) = &self.media else {
            return;
        };
        for message in out {
            match message {
                BridgeMessage::AudioChunk { data } => peer.play(data.clone()),
                BridgeMessage::Interrupted {} => peer.flush(),
                BridgeMessage::TurnComplete(_) => peer.turn_end(),
                _ => {}
            }
        }
    }

    /// Ends the peer connection (with the session, or when it failed).
    fn end_media(&mut self) {
        if self.media.take().is_some() {
            self.translator.set_media_track(false);
        }
        self.held.clear();
    }

    /// One WebRTC signalling step: held until the session is set up, then carried out.
    async fn media_step(&mut self, step: MediaStep) {
        if !self.translator.is_ready() {
            match step {
                MediaStep::Offer(_) => {
                    // A new offer makes what came before it moot.
                    self.held.clear();
                    self.held.push(step);
                }
                MediaStep::Candidate(_) if self.held.len() <= signal::MAX_CANDIDATES => {
                    self.held.push(step)
                }
                MediaStep::Candidate(_) => {}
            }
            return;
        }
        match step {
            MediaStep::Offer(sdp) => {
                // A second offer replaces the peer connection.
                self.end_media();
                let Some(hub) = &self.shared.media else {
                    self.send(BridgeMessage::error("This bridge has no WebRTC transport (its UDP port could not be opened); stream audio with SEND_REALTIME_INPUT and play AUDIO_CHUNK instead.")).await;
                    return;
                };
                match hub.open(&sdp) {
                    Ok((answer, peer)) => {
                        info!(peer = %self.peer, "WebRTC offer answered");
                        self.media = Some(peer);
                        self.translator.set_media_track(true);
                        self.send(BridgeMessage::WebrtcAnswer(WebrtcSdp { sdp: answer }))
                            .await;
                    }
                    Err(sentence) => self.send(BridgeMessage::error(sentence)).await,
                }
            }
            MediaStep::Candidate(candidate) => match signal::candidate(&candidate) {
                Ok(Some(candidate)) => match &self.media {
                    Some(peer) => peer.add_candidate(candidate),
                    None => {
                        self.send(BridgeMessage::error("WEBRTC_ICE_CANDIDATE came before WEBRTC_OFFER (or after its connection ended); it was ignored.")).await
                    }
                },
                Ok(None) => {}
                Err(sentence) => self.send(BridgeMessage::error(sentence)).await,
            },
        }
    }

    async fn on_media_event(&mut self, event: Option<PeerEvent>) {
        match event {
            Some(PeerEvent::Heard(pcm)) => {
                if let Some(message) = self.translator.track_audio(pcm) {
                    self.forward(message).await;
                }
            }
            Some(PeerEvent::Speaking(speaking)) => {
                self.send(BridgeMessage::AssistantSpeaking { speaking })
                    .await
            }
            Some(PeerEvent::Connected) => {
                debug!(peer = %self.peer, "WebRTC peer connected");
            }
            Some(PeerEvent::Failed(sentence)) => {
                self.end_media();
                self.send(BridgeMessage::error(sentence)).await;
            }
            None => self.end_media(),
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
        if let Some(step) = reply.media {
            self.media_step(step).await;
        }
        match reply.session {
            None => false,
            Some(SessionStep::Open(mapped)) => {
                self.open(mapped, None).await;
                false
            }
            Some(SessionStep::Reopen(mapped)) => {
                // The peer connection stays: it belongs to the app's connection, and the new
                // session's audio goes out on it as the old one's did.
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
                self.end_media();
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
