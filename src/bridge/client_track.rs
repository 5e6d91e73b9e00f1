//! `livetalk --bridge URL --bridge-transport webrtc`: the client's voice on a WebRTC track
//! beside the bridge WebSocket. A relay stands between the bridge connection and the session:
//! once the session is set up it offers a peer connection (the bridge's own peer task, in the
//! offering role: `webrtc::MediaHub::offer`), and while the peer is connected it sends the
//! microphone's `realtimeInput.audio` on the track instead of the WebSocket and hands the
//! session the track's audio as the model's, ignoring `AUDIO_CHUNK`s (each is heard once).
//! Until the peer connects, and from the moment it fails or is lost, audio goes over the
//! WebSocket as on the default transport, after one warning; the session goes on.
//!
//! The bridge paces the track in real time, so its `TURN_COMPLETE` overtakes the reply's
//! audio: the relay holds it, and what follows it, until the track has delivered what the
//! `AUDIO_CHUNK`s announced (bounded in time), so the reply is played whole and the app says
//! "speaking" until it ends, as on a direct session. After `INTERRUPTED`, the track's frames
//! still on their way belong to the cut-off reply and are dropped: new audio starts after a
//! pause in the track (the bridge stops sending between replies). A reply's
//! first 100 ms from the track go to the session at once, the rest as it comes: the speaker
//! gets a cushion against late datagrams, as a WebRTC jitter buffer gives.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use livetalk_live::connection::{ConnectionHandle, Outbound, WireTap};
use livetalk_live::events::Inbound;
use livetalk_live::wire::{
    Blob, ClientMessage, Content, OUTPUT_AUDIO_MIME, Part, ServerContent, ServerMessage,
};
use livetalk_live::{CloseInfo, Connection, Outbox, ServerEvent};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::protocol::{AppMessage, WebrtcSdp};
use super::webrtc::{MediaHub, MediaPeer, PeerEvent, WebRtcOptions};

/// What the bridge said about the peer connection, from the connection's reader.
#[derive(Debug)]
pub(super) enum Signal {
    /// `WEBRTC_ANSWER`.
    Answer(String),
    /// A `GEMINI_ERROR` naming WebRTC: the offer was refused, or the bridge's side failed.
    Refused(String),
}

/// Signals queued from the reader (one answer, a few errors).
pub(super) const SIGNAL_QUEUE: usize = 16;
/// Requests and frames queued through the relay, as on the connection it stands for.
const RELAY_QUEUE: usize = 64;
/// The model's 24 kHz PCM16: bytes per millisecond.
const MODEL_BYTES_PER_MS: usize = 48;
/// The track may deliver this much less than was announced (the codec's and the resampler's
/// delay, the last part frame) and still count as the whole reply.
const WHOLE_REPLY_SLACK: usize = 60 * MODEL_BYTES_PER_MS;
/// The track's audio a reply starts with, handed on at once (100 ms): WebRTC's jitter
/// buffer, for a speaker fed frame by frame in real time.
const CUSHION: usize = 100 * MODEL_BYTES_PER_MS;
/// A turn's end is held this much longer than the audio still to come, and while the track
/// flows, this long after its last frame.
const HOLD_SLACK: Duration = Duration::from_secs(1);
/// Messages held behind a turn's end at most; more release it at once.
const MAX_HELD: usize = 256;
/// A pause in the track this long ends a reply's stragglers: frames come every 20 ms.
const TRACK_PAUSE: Duration = Duration::from_millis(60);
/// The model audio of one reply kept to finish it over the WebSocket if the track is lost
/// mid-reply (a minute of 24 kHz PCM16).
const MAX_KEPT: usize = 60 * 1000 * MODEL_BYTES_PER_MS;
/// The microphone's audio queued for the track at most (the microphone path keeps two
/// seconds too).
const MIC_QUEUE: Duration = Duration::from_secs(2);
/// How long the relay waits for the bridge to confirm a close the session asked for before it
/// takes the close as done: a bridge that never closes must not keep a session whose input
/// has ended running.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The connection as the session sees it: the bridge connection behind a relay that moves
/// voice onto a WebRTC track. `connect_timeout` bounds the peer's ICE and DTLS exchange.
pub(super) fn relay(
    connection: Connection,
    signals: mpsc::Receiver<Signal>,
    bridge: Option<SocketAddr>,
    connect_timeout: Duration,
    tap: Option<Arc<dyn WireTap>>,
) -> Connection {
    let (handle, requests) = ConnectionHandle::channel(RELAY_QUEUE);
    let (out, inbound) = mpsc::channel(RELAY_QUEUE);
    let relay = Relay {
        upstream: connection.handle,
        inbound: connection.inbound,
        out,
        requests,
        signals,
        hub: None,
        peer: None,
        link: Link::Offering,
        tap,
        reply: Reply::default(),
        held: VecDeque::new(),
        hold_until: None,
        last_frame: None,
        dropping: false,
        mic_ms: 0,
        close_by: None,
    };
    tokio::spawn(relay.run(bridge, connect_timeout));
    Connection { handle, inbound }
}

/// What the relay takes next.
enum Next {
    Request(Option<Outbound>),
    Bridge(Option<Inbound>),
    Signal(Signal),
    Track(Option<PeerEvent>),
    /// The held turn's end is due.
    HoldOver,
    /// The bridge did not confirm the close in time.
    CloseOver,
}

/// Where the voice goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Offered, not connected yet: the WebSocket carries it meanwhile.
    Offering,
    /// Connected: the track carries it. `switching` while a reply that began on the
    /// WebSocket finishes there (its track audio is dropped until its end).
    Track { switching: bool },
    /// Failed, lost or refused (the warning was given): the WebSocket carries it.
    WebSocket,
}

/// The reply being played: what the bridge announced on the WebSocket and the track delivered.
#[derive(Default)]
struct Reply {
    announced: usize,
    delivered: usize,
    /// The announced audio, to finish the reply over the WebSocket if the track is lost.
    kept: Vec<u8>,
    /// The track's first audio of the reply, until it makes [`CUSHION`].
    cushion: Vec<u8>,
    /// The cushion has been handed on: frames go as they come.
    flowing: bool,
}

struct Relay {
    upstream: ConnectionHandle,
    inbound: mpsc::Receiver<Inbound>,
    out: mpsc::Sender<Inbound>,
    requests: mpsc::Receiver<Outbound>,
    signals: mpsc::Receiver<Signal>,
    /// The UDP side; kept while the peer lives.
    hub: Option<MediaHub>,
    peer: Option<MediaPeer>,
    link: Link,
    tap: Option<Arc<dyn WireTap>>,
    reply: Reply,
    /// A turn's end and what came after it, waiting for the track to finish the reply.
    held: VecDeque<Inbound>,
    hold_until: Option<Instant>,
    /// When the track last delivered a frame.
    last_frame: Option<Instant>,
    /// Dropping an interrupted reply's stragglers until the track pauses.
    dropping: bool,
    /// Microphone audio sent on the track, for the log.
    mic_ms: u64,
    /// The session asked to close: by then the bridge's close must have come.
    close_by: Option<Instant>,
}

impl Relay {
    async fn run(mut self, bridge: Option<SocketAddr>, connect_timeout: Duration) {
        if let Err(sentence) = self.offer(bridge, connect_timeout).await {
            self.fall_back(sentence).await;
        }
        loop {
            let has_peer = self.peer.is_some();
            let peer = &mut self.peer;
            let hold_until = self.hold_until;
            let close_by = self.close_by;
            let next = tokio::select! {
                request = self.requests.recv() => Next::Request(request),
                inbound = self.inbound.recv() => Next::Bridge(inbound),
                Some(signal) = self.signals.recv() => Next::Signal(signal),
                event = async { peer.as_mut()?.next().await }, if has_peer => Next::Track(event),
                _ = sleep_until(hold_until), if hold_until.is_some() => Next::HoldOver,
                _ = sleep_until(close_by), if close_by.is_some() => Next::CloseOver,
            };
            let go_on = match next {
                Next::Request(Some(request)) => {
                    self.request(request).await;
                    true
                }
                // The session let go of this connection, or the bridge's ended.
                Next::Request(None) | Next::Bridge(None) => false,
                Next::Bridge(Some(inbound)) => self.on_bridge_frame(inbound).await,
                Next::Signal(signal) => {
                    self.signal(signal).await;
                    true
                }
                Next::Track(event) => self.on_track_event(event).await,
                Next::HoldOver => self.release().await,
                Next::CloseOver => {
                    info!(
                        "the bridge did not confirm the close within {} s; the session is over",
                        CLOSE_WAIT.as_secs()
                    );
                    let _ = self.release().await;
                    let closed = CloseInfo::ended_by_client();
                    let _ = self.send(Inbound::news(ServerEvent::Closed(closed))).await;
                    false
                }
            };
            if !go_on {
                break;
            }
        }
        // Whatever was held goes before the end (the session may still take it).
        let _ = self.release().await;
    }

    /// Opens the UDP side on the address that routes to the bridge and sends the offer.
    async fn offer(
        &mut self,
        bridge: Option<SocketAddr>,
        connect_timeout: Duration,
    ) -> Result<(), String> {
        let cannot = |why: String| {
            format!("WebRTC audio is unavailable ({why}); the session goes on over the WebSocket.")
        };
        let bridge =
            bridge.ok_or_else(|| cannot("the bridge's address could not be found".into()))?;
        let local = route_to(bridge)
            .map_err(|e| cannot(format!("no local address routes to the bridge: {e}")))?;
        let options = WebRtcOptions {
            max_peers: 1,
            connect_timeout,
            max_buffered: MIC_QUEUE,
            ..WebRtcOptions::default()
        };
        let hub = MediaHub::bind(local, options)
            .await
            .map_err(|e| cannot(format!("{e:#}")))?;
        let (sdp, peer) = hub.offer().map_err(cannot)?;
        let offer = AppMessage::WebrtcOffer(WebrtcSdp { sdp }).encode();
        if self.upstream.send_frame(offer).await.is_err() {
            return Ok(());
        }
        info!(%local, "WebRTC offer sent to the bridge");
        self.hub = Some(hub);
        self.peer = Some(peer);
        Ok(())
    }

    /// A request of the session: the microphone's audio goes on the track while it is up.
    async fn request(&mut self, request: Outbound) {
        match request {
            Outbound::Message(message) => {
                let message = match (*message, &self.peer, self.link) {
                    (ClientMessage::RealtimeInput(mut input), Some(peer), Link::Track { .. })
                        if input.audio.is_some() =>
                    {
                        let audio = input.audio.take().unwrap_or_default();
                        self.mic_ms += audio.data.len() as u64 / 32;
                        let sent = ClientMessage::RealtimeInput(
                            livetalk_live::wire::RealtimeInput::mic_audio(audio.data.clone()),
                        );
                        peer.play(audio.data);
                        // The recording reads like a direct session's: the audio was sent.
                        if let Some(tap) = &self.tap {
                            let bytes = sent_bytes(&sent);
                            tap.sent(&Arc::new(sent), bytes);
                        }
                        if input == livetalk_live::wire::RealtimeInput::default() {
                            return;
                        }
                        ClientMessage::RealtimeInput(input)
                    }
                    (message, _, _) => message,
                };
                let _ = self.upstream.send(message).await;
            }
            Outbound::Frame(text) => {
                let _ = self.upstream.send_frame(text).await;
            }
            Outbound::Close => {
                self.upstream.close().await;
                self.close_by
                    .get_or_insert_with(|| Instant::now() + CLOSE_WAIT);
            }
        }
    }

    /// A frame from the bridge connection; `false` once the session is gone.
    async fn on_bridge_frame(&mut self, inbound: Inbound) -> bool {
        let turn = inbound
            .reading()
            .map(|reading| reading.turn())
            .unwrap_or_default();
        let (interrupted, turn_complete) = (turn.interrupted, turn.turn_complete);
        let closed = inbound
            .events
            .iter()
            .any(|e| matches!(e, ServerEvent::Closed(_)));
        if let Some(audio) = chunk_audio(&inbound) {
            if self.link == (Link::Track { switching: false }) {
                // The track plays it; kept in case the track is lost before it has.
                self.reply.announced += audio.len();
                if self.reply.kept.len() + audio.len() <= MAX_KEPT {
                    self.reply.kept.extend_from_slice(audio);
                }
                return true;
            }
            self.reply.announced += audio.len();
        }
        if interrupted {
            // What the track still brings of the cut-off reply is not heard.
            self.held_pass().await;
            self.end_reply(true);
            return self.send(inbound).await;
        }
        if closed {
            return self.release().await && self.send(inbound).await;
        }
        if !self.held.is_empty() {
            if self.held.len() >= MAX_HELD {
                if !self.release().await {
                    return false;
                }
            } else {
                self.held.push_back(inbound);
                return true;
            }
        }
        if turn_complete {
            if matches!(self.link, Link::Track { switching: false }) && self.reply.announced > 0 {
                // Held until the track pauses having delivered what was announced.
                let owed = self.reply.announced.saturating_sub(self.reply.delivered);
                let wait = match owed {
                    0..=WHOLE_REPLY_SLACK => TRACK_PAUSE,
                    owed => Duration::from_millis((owed / MODEL_BYTES_PER_MS) as u64) + HOLD_SLACK,
                };
                self.hold_until = Some(Instant::now() + wait);
                self.held.push_back(inbound);
                return true;
            }
            self.end_reply(false);
        }
        self.send(inbound).await
    }

    /// What the peer connection did; `false` once the session is gone.
    async fn on_track_event(&mut self, event: Option<PeerEvent>) -> bool {
        match event {
            Some(PeerEvent::Connected) => {
                if self.link == Link::Offering {
                    // A reply already playing from the WebSocket finishes there.
                    let switching = self.reply.announced > 0;
                    self.link = Link::Track { switching };
                    info!("WebRTC connected: voice goes over the track");
                }
                true
            }
            Some(PeerEvent::Heard(pcm)) => self.heard(pcm).await,
            Some(PeerEvent::Speaking(_)) => true,
            Some(PeerEvent::Failed(sentence)) => {
                self.fall_back(sentence).await;
                true
            }
            None => {
                self.fall_back(
                    "The WebRTC connection ended; the session goes on over the WebSocket.".into(),
                )
                .await;
                true
            }
        }
    }

    /// 20 ms of the model's voice from the track.
    async fn heard(&mut self, pcm: Vec<u8>) -> bool {
        let now = Instant::now();
        let paused = self
            .last_frame
            .is_none_or(|last| now.duration_since(last) >= TRACK_PAUSE);
        self.last_frame = Some(now);
        if self.dropping && !paused {
            return true;
        }
        self.dropping = false;
        if !matches!(self.link, Link::Track { switching: false }) {
            return true;
        }
        self.reply.delivered += pcm.len();
        // A reply's first frames wait until they make a cushion: the track brings the rest
        // just in time, and the speaker must not run dry at each late datagram.
        self.reply.cushion.extend_from_slice(&pcm);
        if (self.reply.flowing || self.reply.cushion.len() >= CUSHION)
            && !self.flush_cushion().await
        {
            return false;
        }
        if !self.held.is_empty() {
            self.hold_until = if self.reply.delivered + WHOLE_REPLY_SLACK >= self.reply.announced {
                // The reply is all but in: its turn ends once the track pauses.
                Some(now + TRACK_PAUSE)
            } else {
                // A track that falls behind real time (a busy machine) is waited for while
                // it flows; a second without a frame means the rest is not coming.
                self.hold_until.max(Some(now + HOLD_SLACK))
            };
        }
        true
    }

    async fn signal(&mut self, signal: Signal) {
        match signal {
            Signal::Answer(sdp) => {
                let Some(peer) = &self.peer else {
                    return;
                };
                if let Err(sentence) = peer.answer(&sdp) {
                    self.fall_back(sentence).await;
                }
            }
            Signal::Refused(message) => {
                let message =
                    livetalk_live::excerpt::bounded(&message, livetalk_live::excerpt::SUMMARY);
                self.fall_back(format!(
                    "The bridge did not carry the WebRTC audio ({message}); the session goes on over the WebSocket."
                ))
                .await;
            }
        }
    }

    /// The WebSocket carries the voice from now on; the one warning says why. A reply the
    /// track had not finished is finished from what the WebSocket announced.
    async fn fall_back(&mut self, sentence: String) {
        self.peer = None;
        self.hub = None;
        let was = std::mem::replace(&mut self.link, Link::WebSocket);
        if was == Link::WebSocket {
            debug!("WebRTC: {sentence}");
            return;
        }
        warn!("{sentence}");
        let _ = self.flush_cushion().await;
        if matches!(was, Link::Track { switching: false }) && !self.dropping {
            let rest = self
                .reply
                .kept
                .get(self.reply.delivered..)
                .unwrap_or_default();
            if !rest.is_empty() {
                let rest = rest.to_vec();
                self.reply.delivered += rest.len();
                let _ = self.send(Inbound::message(model_audio(rest))).await;
            }
        }
        let _ = self
            .send(Inbound::news(ServerEvent::FrameSkipped {
                reason: sentence,
            }))
            .await;
        let _ = self.release().await;
    }

    /// Hands the session the track's audio that waits in the cushion; from then on the
    /// reply's frames go as they come. `false` once the session is gone.
    async fn flush_cushion(&mut self) -> bool {
        self.reply.flowing = true;
        let pcm = std::mem::take(&mut self.reply.cushion);
        if pcm.is_empty() {
            return true;
        }
        let bytes = pcm.len();
        self.send(Inbound::message(model_audio(pcm)).sized(bytes))
            .await
    }

    /// Passes on what was held behind a turn's end; `false` once the session is gone.
    async fn release(&mut self) -> bool {
        self.hold_until = None;
        if !self.flush_cushion().await {
            return false;
        }
        if self.held.is_empty() {
            return true;
        }
        self.end_reply(false);
        while let Some(inbound) = self.held.pop_front() {
            if !self.send(inbound).await {
                return false;
            }
        }
        true
    }

    /// An interruption drops what was held rather than waiting: the turn it ended is over.
    async fn held_pass(&mut self) {
        self.hold_until = None;
        while let Some(inbound) = self.held.pop_front() {
            if !self.send(inbound).await {
                return;
            }
        }
    }

    /// A reply is over (a cut-off one's stragglers on the track are dropped), and a reply that began on
    /// the WebSocket hands the voice to the track.
    fn end_reply(&mut self, interrupted: bool) {
        let reply = std::mem::take(&mut self.reply);
        if let Link::Track { switching } = &mut self.link {
            if !*switching && reply.announced > 0 {
                info!(
                    track_ms = reply.delivered / MODEL_BYTES_PER_MS,
                    announced_ms = reply.announced / MODEL_BYTES_PER_MS,
                    mic_ms = self.mic_ms,
                    interrupted,
                    "WebRTC reply heard on the track (its AUDIO_CHUNKs ignored)"
                );
            }
            *switching = false;
            // Only a cut-off reply's frames are dropped: a turn's end waits for the track, and
            // what a stalled track brings after it is still the reply.
            self.dropping = interrupted;
        }
    }

    async fn send(&mut self, inbound: Inbound) -> bool {
        self.out.send(inbound).await.is_ok()
    }
}

/// The audio of a frame that is an `AUDIO_CHUNK` (only model audio, nothing else): the samples
/// its one `ModelAudio` event holds.
fn chunk_audio(inbound: &Inbound) -> Option<&[u8]> {
    if !inbound.reading()?.only_audio() {
        return None;
    }
    match inbound.events.as_slice() {
        [ServerEvent::ModelAudio { pcm, .. }] => Some(pcm),
        _ => None,
    }
}

/// The size a message would have had on the WebSocket, for the tap.
fn sent_bytes(message: &ClientMessage) -> usize {
    AppMessage::SendRealtimeInput(super::protocol::RealtimeInputPayload {
        input: match message {
            ClientMessage::RealtimeInput(input) => input.clone(),
            _ => return 0,
        },
        chunks: Vec::new(),
    })
    .encode()
    .len()
}

/// The local address the system routes to `bridge` from (a connected UDP socket says it; no
/// datagram is sent): the host candidate the bridge can reach.
fn route_to(bridge: SocketAddr) -> std::io::Result<IpAddr> {
    let any: SocketAddr = if bridge.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(any)?;
    socket.connect(bridge)?;
    Ok(socket.local_addr()?.ip())
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The model's 24 kHz PCM16 audio as the service sends it: an `AUDIO_CHUNK`, or what the
/// WebRTC track delivered.
pub(super) fn model_audio(data: Vec<u8>) -> ServerMessage {
    ServerMessage {
        server_content: Some(ServerContent {
            model_turn: Some(Content {
                role: Some("model".to_owned()),
                parts: vec![Part {
                    inline_data: Some(Blob {
                        mime_type: OUTPUT_AUDIO_MIME.to_owned(),
                        data,
                    }),
                    ..Part::default()
                }],
            }),
            ..ServerContent::default()
        }),
        ..ServerMessage::default()
    }
}
