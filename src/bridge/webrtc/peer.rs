//! One peer connection's task, for either end: str0m's sans-IO `Rtc` driven by the datagrams
//! its router hands it, its own timers and its owner's commands. What it hears on the track
//! is decoded at 48 kHz, resampled and cut into 20 ms PCM16 frames as they arrive; what it is
//! given to play is resampled to 48 kHz, queued (bounded) and sent as one 20 ms Opus frame
//! every 20 ms of wall-clock time, so the far end hears it in real time however fast it came;
//! a flush drops the queue at once. (The offerer's microphone is real time already: its
//! frames go as soon as they are whole.) On the bridge (the answerer) it plays the model's 24 kHz
//! audio and hears the app's microphone at 16 kHz (the microphone path's frames); on
//! `livetalk --bridge-transport webrtc` (the offerer) it plays the microphone and hears the
//! model.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opusic_c::{Application, Channels, Decoder, Encoder, SampleRate};
use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::format::Codec;
use str0m::media::{Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{DatagramRecv, Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tracing::debug;

use super::{Datagram, RouteGuard, WebRtcOptions};
use crate::audio::pcm::{Framer, extend_f32_from_pcm16_le, extend_pcm16_le_from_f32};
use crate::audio::resample::StreamResampler;

/// Commands queued for a peer: model audio arrives in bursts of up to a few hundred chunks.
pub(super) const COMMAND_QUEUE: usize = 1024;
/// Events queued for the session loop: about five seconds of heard frames.
pub(super) const EVENT_QUEUE: usize = 256;

/// The track's rate, and one frame of it.
const TRACK_RATE: u32 = 48_000;
const FRAME: usize = 960;
const FRAME_TIME: Duration = Duration::from_millis(20);
/// The longest Opus packet decodes to 120 ms.
const MAX_DECODED: usize = TRACK_RATE as usize / 1000 * 120;
/// Behind schedule by more than this (a stalled task), the pacer starts afresh instead of
/// sending a burst.
const MAX_LATE: Duration = Duration::from_millis(100);

/// Which end of the peer connection a task is, and so which audio goes which way.
pub(super) enum Role {
    /// The bridge, which answered the app's offer: it plays the model's 24 kHz audio and
    /// hears the app's microphone at 16 kHz.
    Answerer,
    /// `livetalk --bridge-transport webrtc`, which made the offer (held until the answer
    /// comes) with its audio track `mid`: it plays the microphone's 16 kHz audio and hears
    /// the model's at 24 kHz.
    Offerer {
        pending: Option<SdpPendingOffer>,
        mid: Mid,
    },
}

impl Role {
    /// The rate of the PCM it is given to play.
    fn plays_at(&self) -> u32 {
        match self {
            Role::Answerer => 24_000,
            Role::Offerer { .. } => 16_000,
        }
    }

    /// Who is at the other end, for sentences.
    fn far_end(&self) -> &'static str {
        match self {
            Role::Answerer => "the app",
            Role::Offerer { .. } => "the bridge",
        }
    }

    /// The rate of the PCM it hands on from the track.
    fn hears_at(&self) -> u32 {
        match self {
            Role::Answerer => 16_000,
            Role::Offerer { .. } => 24_000,
        }
    }
}

/// What the session loop asks of a peer.
#[derive(Debug)]
pub(super) enum Command {
    Candidate(Candidate),
    /// The answer to the offer, with the answerer's addresses from its candidates.
    Answer {
        answer: Box<SdpAnswer>,
        addresses: Vec<SocketAddr>,
    },
    /// Audio to play, PCM16 at the role's rate, queued under flush `epoch`.
    Play {
        pcm: Vec<u8>,
        epoch: u64,
    },
    TurnEnd,
    /// Wakes the task for a flush (the epoch says it).
    Flush,
}

/// What a peer connection tells its session loop.
#[derive(Debug, PartialEq)]
pub enum PeerEvent {
    /// ICE and DTLS are up: audio flows from now on.
    Connected,
    /// 20 ms of the far end's track, PCM16 mono at the role's rate: the app's microphone for
    /// `realtimeInput.audio` on the bridge, the model's voice on the offering client.
    Heard(Vec<u8>),
    /// What this end plays started or stopped going out on the track.
    Speaking(bool),
    /// The peer connection failed or was lost; the sentence for the app. Nothing follows.
    Failed(String),
}

/// The downstream half: the model's audio on its way to the track.
struct Speaker {
    encoder: Encoder,
    resampler: StreamResampler,
    /// 48 kHz samples waiting for their frame.
    queue: VecDeque<f32>,
    max_queue: usize,
    scratch: Vec<f32>,
    packet: Vec<u8>,
    /// When the next frame is due; `None` while nothing is being sent.
    next_frame: Option<Instant>,
    /// The RTP clock of the next frame.
    rtp_samples: u64,
    speaking: bool,
    turn_ended: bool,
    flush_epoch: u64,
    dropped_chunks: u64,
}

/// The upstream half: the app's track on its way to the session.
struct Ear {
    decoder: Decoder,
    resampler: StreamResampler,
    framer: Framer,
    decoded: Vec<f32>,
    resampled: Vec<f32>,
}

pub(super) struct PeerTask {
    rtc: Rtc,
    role: Role,
    flushes: Arc<AtomicU64>,
    sockets: Vec<(SocketAddr, Arc<UdpSocket>)>,
    datagrams: mpsc::Receiver<Datagram>,
    commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<PeerEvent>,
    connect_by: Instant,
    connect_timeout: Duration,
    connected: bool,
    mid: Option<Mid>,
    candidates: usize,
    ear: Ear,
    speaker: Speaker,
    route: RouteGuard,
}

impl PeerTask {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        rtc: Rtc,
        role: Role,
        flushes: Arc<AtomicU64>,
        sockets: Vec<(SocketAddr, Arc<UdpSocket>)>,
        datagrams: mpsc::Receiver<Datagram>,
        commands: mpsc::Receiver<Command>,
        events: mpsc::Sender<PeerEvent>,
        options: &WebRtcOptions,
        now: Instant,
        route: RouteGuard,
    ) -> Result<PeerTask, String> {
        let codec = |e: opusic_c::ErrorCode| {
            format!("The bridge's Opus codec could not be started ({e:?}); WebRTC is unavailable.")
        };
        let resampler = |from, to| {
            StreamResampler::new(from, to)
                .map_err(|e| format!("The bridge cannot resample the WebRTC audio: {e}"))
        };
        let mut encoder =
            Encoder::new(Channels::Mono, SampleRate::Hz48000, Application::Voip).map_err(codec)?;
        // Speech at the bit rate browsers use for a voice call.
        let _ = encoder.set_bitrate(opusic_c::Bitrate::Value(32_000));
        let max_queue = (options.max_buffered.as_secs_f64() * TRACK_RATE as f64) as usize;
        let (plays_at, hears_at) = (role.plays_at(), role.hears_at());
        // The answerer learns the track from the offer (`MediaAdded`); the offerer made it.
        let mid = match &role {
            Role::Offerer { mid, .. } => Some(*mid),
            Role::Answerer => None,
        };
        Ok(PeerTask {
            rtc,
            role,
            flushes,
            sockets,
            datagrams,
            commands,
            events,
            connect_by: now + options.connect_timeout,
            connect_timeout: options.connect_timeout,
            connected: false,
            mid,
            candidates: 0,
            ear: Ear {
                decoder: Decoder::new(Channels::Mono, SampleRate::Hz48000).map_err(codec)?,
                resampler: resampler(TRACK_RATE, hears_at)?,
                // 20 ms frames, as the microphone path sends and the service's audio comes.
                framer: Framer::new(hears_at as usize / 50),
                decoded: vec![0.0; MAX_DECODED],
                resampled: Vec::new(),
            },
            speaker: Speaker {
                encoder,
                resampler: resampler(plays_at, TRACK_RATE)?,
                queue: VecDeque::new(),
                max_queue,
                scratch: Vec::new(),
                packet: vec![0; 1500],
                next_frame: None,
                rtp_samples: 0,
                speaking: false,
                turn_ended: false,
                flush_epoch: 0,
                dropped_chunks: 0,
            },
            route,
        })
    }

    /// Runs until the peer connection fails or the session loop drops its [`super::MediaPeer`].
    pub(super) async fn run(mut self) {
        if let Err(sentence) = self.drive().await {
            debug!("WebRTC peer ended: {sentence}");
            let _ = self.events.send(PeerEvent::Failed(sentence)).await;
        }
        self.rtc.disconnect();
    }

    async fn drive(&mut self) -> Result<(), String> {
        loop {
            let timeout = self.poll().await?;
            let mut wake = timeout;
            if let Some(next) = self.speaker.next_frame {
                wake = wake.min(next);
            }
            if !self.connected {
                wake = wake.min(self.connect_by);
            }
            tokio::select! {
                biased;
                command = self.commands.recv() => match command {
                    Some(command) => self.command(command).await?,
                    None => return Ok(()),
                },
                datagram = self.datagrams.recv() => match datagram {
                    Some(datagram) => self.receive(datagram)?,
                    None => return Ok(()),
                },
                _ = tokio::time::sleep_until(wake.into()) => {
                    let now = Instant::now();
                    if !self.connected && now >= self.connect_by {
                        return Err(format!(
                            "The WebRTC connection was not established within {} s (no ICE and DTLS exchange with {}); the session goes on over the WebSocket.",
                            self.connect_timeout.as_secs_f64(),
                            self.role.far_end()
                        ));
                    }
                    self.check_flush().await;
                    if self.speaker.next_frame.is_some_and(|next| next <= now) {
                        self.send_frame(now).await;
                    }
                    self.rtc
                        .handle_input(Input::Timeout(now))
                        .map_err(|e| failed("timer", e))?;
                }
            }
        }
    }

    /// Carries out everything str0m has to say; the time it next needs waking.
    async fn poll(&mut self) -> Result<Instant, String> {
        loop {
            match self.rtc.poll_output().map_err(|e| failed("poll", e))? {
                Output::Timeout(at) => return Ok(at),
                Output::Transmit(transmit) => {
                    let socket = self
                        .sockets
                        .iter()
                        .find(|(announced, _)| *announced == transmit.source)
                        .or(self.sockets.first())
                        .map(|(_, s)| s.clone());
                    if let Some(socket) = socket
                        && let Err(e) = socket.try_send_to(&transmit.contents, transmit.destination)
                    {
                        // A full send buffer loses a datagram, as the network may.
                        debug!("WebRTC send to {}: {e}", transmit.destination);
                    }
                }
                Output::Event(event) => self.event(event).await?,
            }
        }
    }

    async fn event(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Connected => {
                self.connected = true;
                debug!("WebRTC peer connected");
                let _ = self.events.send(PeerEvent::Connected).await;
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) if self.connected => {
                return Err(format!(
                    "The WebRTC connection to {} was lost; the session goes on over the WebSocket.",
                    self.role.far_end()
                ));
            }
            Event::MediaAdded(added) if added.kind == MediaKind::Audio => {
                self.mid.get_or_insert(added.mid);
            }
            Event::MediaData(data) => self.heard(&data.data),
            Event::ChannelOpen(_, label) => debug!(%label, "WebRTC data channel open"),
            Event::ChannelData(data) => {
                // The original bridge's apps open one; nothing is asked of it.
                debug!(
                    bytes = data.data.len(),
                    "WebRTC data channel message ignored"
                );
            }
            _ => {}
        }
        Ok(())
    }

    fn receive(&mut self, datagram: Datagram) -> Result<(), String> {
        let Ok(contents) = DatagramRecv::try_from(datagram.data.as_slice()) else {
            // Not STUN, DTLS or RTP: nothing str0m would take.
            return Ok(());
        };
        let input = Input::Receive(
            datagram.at,
            Receive {
                proto: Protocol::Udp,
                source: datagram.source,
                destination: datagram.destination,
                contents,
            },
        );
        if self.rtc.accepts(&input) {
            self.rtc
                .handle_input(input)
                .map_err(|e| failed("input", e))?;
        }
        Ok(())
    }

    async fn command(&mut self, command: Command) -> Result<(), String> {
        self.check_flush().await;
        match command {
            Command::Candidate(candidate) => {
                if self.candidates < super::signal::MAX_CANDIDATES {
                    self.candidates += 1;
                    if matches!(self.role, Role::Offerer { .. }) {
                        self.route.allow(candidate.addr());
                    }
                    self.rtc.add_remote_candidate(candidate);
                }
            }
            Command::Answer { answer, addresses } => {
                let Role::Offerer { pending, .. } = &mut self.role else {
                    return Ok(());
                };
                let Some(pending) = pending.take() else {
                    // A second answer to one offer: the first one stands.
                    return Ok(());
                };
                for address in addresses {
                    self.route.allow(address);
                }
                let refused = |e: str0m::RtcError| {
                    debug!("WebRTC answer refused: {e}");
                    "The bridge's WebRTC answer does not fit the offer; the session goes on over the WebSocket.".to_owned()
                };
                super::signal::guarded(
                    || self.rtc.sdp_api().accept_answer(pending, *answer),
                    "The bridge's WebRTC answer could not be used; the session goes on over the WebSocket.",
                )?
                .map_err(refused)?;
            }
            Command::Play { pcm, epoch } => {
                if epoch == self.speaker.flush_epoch && self.connected {
                    self.speaker.queue(&pcm);
                    self.start_pacing();
                }
            }
            Command::TurnEnd => {
                self.speaker.turn_end();
                if self.speaker.queue.is_empty() {
                    self.stop_speaking().await;
                } else {
                    self.start_pacing();
                }
            }
            Command::Flush => {}
        }
        Ok(())
    }

    /// A barge-in the session loop asked for since the last look: the queue goes at once.
    async fn check_flush(&mut self) {
        let epoch = self.flushes.load(Ordering::Acquire);
        if epoch != self.speaker.flush_epoch {
            self.speaker.flush_epoch = epoch;
            self.speaker.queue.clear();
            self.speaker.resampler.reset();
            self.speaker.next_frame = None;
            self.speaker.turn_ended = false;
            self.stop_speaking().await;
        }
    }

    fn start_pacing(&mut self) {
        let speaker = &mut self.speaker;
        let ready =
            speaker.queue.len() >= FRAME || (speaker.turn_ended && !speaker.queue.is_empty());
        if speaker.next_frame.is_none() && ready {
            speaker.next_frame = Some(Instant::now());
        }
    }

    async fn stop_speaking(&mut self) {
        if std::mem::replace(&mut self.speaker.speaking, false) {
            let _ = self.events.send(PeerEvent::Speaking(false)).await;
        }
    }

    /// The frame due now, if there is one; then when the next is due.
    async fn send_frame(&mut self, now: Instant) {
        let Some(due) = self.speaker.next_frame else {
            return;
        };
        let speaker = &mut self.speaker;
        let take = speaker.queue.len().min(FRAME);
        if take < FRAME && !speaker.turn_ended {
            // The service has not sent the rest yet: wait for it.
            speaker.next_frame = None;
            return;
        }
        if take == 0 {
            speaker.next_frame = None;
            self.stop_speaking().await;
            return;
        }
        speaker.scratch.clear();
        speaker.scratch.extend(speaker.queue.drain(..take));
        speaker.scratch.resize(FRAME, 0.0);
        let written = match speaker
            .encoder
            .encode_float_to_slice(&speaker.scratch, &mut speaker.packet)
        {
            Ok(len) => self.write(now, len),
            Err(e) => {
                debug!("Opus encode: {e:?}");
                false
            }
        };
        let speaker = &mut self.speaker;
        speaker.rtp_samples += FRAME as u64;
        let next = due + FRAME_TIME;
        speaker.next_frame = Some(match self.role {
            // The microphone comes in real time already: what is queued goes at once, so a
            // busy moment delays it rather than piling it up until the queue drops some.
            Role::Offerer { .. } => now,
            Role::Answerer if now.saturating_duration_since(next) > MAX_LATE => now + FRAME_TIME,
            Role::Answerer => next,
        });
        if written && !speaker.speaking {
            speaker.speaking = true;
            let _ = self.events.send(PeerEvent::Speaking(true)).await;
        }
    }

    fn write(&mut self, now: Instant, len: usize) -> bool {
        let Some(mid) = self.mid else {
            return false;
        };
        let Some(writer) = self.rtc.writer(mid) else {
            return false;
        };
        let Some(pt) = writer
            .payload_params()
            .find(|p| p.spec().codec == Codec::Opus)
            .map(|p| p.pt())
        else {
            return false;
        };
        let time = MediaTime::new(self.speaker.rtp_samples, Frequency::FORTY_EIGHT_KHZ);
        let packet = self.speaker.packet[..len].to_vec();
        match writer.write(pt, now, time, packet) {
            Ok(()) => true,
            Err(e) => {
                debug!("WebRTC write: {e}");
                false
            }
        }
    }

    /// One Opus packet of the app's track: decoded, resampled, framed and handed on.
    fn heard(&mut self, packet: &[u8]) {
        let ear = &mut self.ear;
        let samples = match ear
            .decoder
            .decode_float_to_slice(packet, &mut ear.decoded, false)
        {
            Ok(samples) => samples.min(ear.decoded.len()),
            Err(e) => {
                debug!("Opus decode: {e:?}");
                return;
            }
        };
        ear.resampled.clear();
        ear.resampler
            .push(&ear.decoded[..samples], &mut ear.resampled);
        let events = &self.events;
        ear.framer.push(&ear.resampled, |frame| {
            let mut pcm = Vec::with_capacity(frame.len() * 2);
            extend_pcm16_le_from_f32(frame, &mut pcm);
            // A session loop this far behind loses audio, as the microphone path does.
            let _ = events.try_send(PeerEvent::Heard(pcm));
        });
    }
}

impl Speaker {
    fn queue(&mut self, pcm: &[u8]) {
        self.turn_ended = false;
        let mut samples = Vec::with_capacity(pcm.len() / 2);
        extend_f32_from_pcm16_le(pcm, &mut samples);
        let mut resampled = Vec::with_capacity(samples.len() * 2 + FRAME);
        self.resampler.push(&samples, &mut resampled);
        if self.queue.len() + resampled.len() > self.max_queue {
            self.dropped_chunks += 1;
            debug!(
                dropped = self.dropped_chunks,
                "WebRTC track queue full: audio to play dropped"
            );
            return;
        }
        self.queue.extend(resampled);
    }

    fn turn_end(&mut self) {
        self.turn_ended = true;
        let mut tail = Vec::new();
        self.resampler.flush(&mut tail);
        self.queue.extend(tail);
    }
}

fn failed(what: &str, e: str0m::RtcError) -> String {
    debug!("WebRTC {what}: {e}");
    "The WebRTC connection failed; the session goes on over the WebSocket.".into()
}
