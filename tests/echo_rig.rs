//! Echo on the real-time rig: the virtual speaker is heard by the virtual microphone 100 ms
//! later (a room), and a user speaks over the model. Measured on the 16 kHz audio a local fake
//! Live server receives, per echo mode (`off`, `aec`, `gate`) and device rate: how far the
//! echo is suppressed while only the model talks, and whether the user's phrase arrives whole.
//! Then the offline demo model: speaking over its reply interrupts it with `aec` only.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use common::LineWatcher;
use common::rig::{self, PulseRig, RECORD_RATE, RigHost, RigSetup};
use livetalk::audio::resample::StreamResampler;

/// The room: what the speaker plays reaches the microphone this much later, at unity gain.
const ACOUSTIC_DELAY: Duration = Duration::from_millis(100);
/// The model's reply as played (speech level, pauses not counted); the echo is as loud.
const REPLY_DBFS: f64 = -26.0;
/// The user speaks this much louder than the echo of the model.
const PHRASE_OVER_ECHO_DB: f64 = 3.0;
/// The user starts speaking this long after the reply is first heard.
const PHRASE_AFTER: f64 = 3.0;
/// The mic's rate on the wire.
const WIRE_RATE: u32 = 16_000;
/// Mic audio lost on the way to the fake server (seconds) makes a run void: the figures place
/// the reply and the phrase in it by the capture clock. Below this it is framing, not loss: the
/// quickest chunk's lateness moves with the phase between the device's buffers and the
/// client's 10 ms processing and 20 ms wire frames.
const MAX_LOST: f64 = 0.035;
/// The same for the sound server's canceller: its source (32 kHz, in blocks of its own) came
/// 40–90 ms short in most runs on an idle machine, as its own start, not the machine's load.
const MAX_LOST_SYSTEM: f64 = 0.1;
/// What the fake server's model says: about 9 s of espeak-ng speech.
const REPLY_TEXT: &str = "Well, it has been a busy day. In the morning I read about the weather in \
    the mountains, and after lunch I helped a friend plan a long walk along the river to the old \
    bridge.";
/// What the user says over it, in another voice.
const PHRASE_TEXT: &str = "Sorry to cut in, could you tell me the time?";
const PHRASE_VOICE: &str = "en-us+f3";

/// The phrase is correlated in pieces this long (wire samples), each found within the slack
/// of where the whole phrase was: the rig's loopback re-times itself by some milliseconds when
/// paplay joins the mic's sink, mid-phrase in some runs, and a whole-phrase correlation then
/// fell to 0.59 with the mic open and nothing cancelled.
const PHRASE_PIECE: usize = WIRE_RATE as usize / 4;
const PHRASE_PIECE_SLACK: usize = WIRE_RATE as usize * 3 / 100;

/// The mode that measures the sound server's own canceller (`module-echo-cancel`) with
/// livetalk's off: the bar livetalk's is held to.
const SYSTEM: &str = "system";

/// The acceptance bars: no run under 25 dB of echo suppression or a phrase correlation of
/// 0.60 (the phrase is 3 dB over the echo; the open mic measures about 0.8 against it before
/// noise suppression).
const MIN_ECHO_SUPPRESSION_DB: f64 = 25.0;
const MIN_PHRASE_CORRELATION: f64 = 0.60;
const MAX_PHRASE_LOSS_DB: f64 = 8.0;
/// The gate must take the phrase away: at least 99 % of its energy, and what is left must
/// not look like it. A phrase that got through loses at most a few dB and correlates at
/// 0.60 or more, so neither bar can be met by a phrase the gate let through.
const MIN_GATE_PHRASE_CUT_DB: f64 = 20.0;
const MAX_GATE_PHRASE_CORRELATION: f64 = 0.3;

/// Audio resampled whole from `from` to `to` Hz.
fn resample(samples: &[f32], from: u32, to: u32) -> Vec<f32> {
    StreamResampler::whole(samples, from, to).unwrap()
}

/// `samples` at `speech_dbfs` of speech level; under half of full scale, so that the echo and
/// the phrase add up in the mic without clipping (a clipped echo is not linear).
fn scaled(samples: &[f32], rate: u32, speech_dbfs: f64) -> Vec<f32> {
    let gain = 10f64.powf((speech_dbfs - rig::speech_level_dbfs(samples, rate)) / 20.0) as f32;
    let out: Vec<f32> = samples.iter().map(|s| s * gain).collect();
    let peak = out.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    assert!(peak < 0.5, "peak {peak:.2}: leave room for the mix");
    out
}

fn to_pcm16(samples: &[f32]) -> Vec<i16> {
    samples
        .iter()
        .map(|s| (s * 32_768.0).round().clamp(-32_768.0, 32_767.0) as i16)
        .collect()
}

fn from_pcm16(samples: &[i16]) -> Vec<f32> {
    samples.iter().map(|&s| f32::from(s) / 32_768.0).collect()
}

fn write_wav(path: &Path, rate: u32, samples: &[f32]) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec).unwrap();
    for s in to_pcm16(samples) {
        writer.write_sample(s).unwrap();
    }
    writer.finalize().unwrap();
}

fn db(ratio: f64) -> f64 {
    20.0 * ratio.log10()
}

/// The sounds of a conversation over the rig.
struct Script {
    /// The model's reply, 24 kHz PCM16, at [`REPLY_DBFS`].
    reply: Arc<Vec<i16>>,
    /// The reply at the wire's rate: what its echo looks like in the mic.
    reply_wire: Vec<f32>,
    /// The user's phrase at [`PHRASE_OVER_ECHO_DB`] over the echo, for paplay.
    phrase_wav: PathBuf,
    /// The phrase at the wire's rate, its leading and trailing silence cut.
    phrase_reference: Vec<f32>,
    /// How far into the phrase's file its sound starts, in wire samples.
    phrase_lead: usize,
}

impl Script {
    fn new(dir: &Path) -> Script {
        let reply =
            livetalk::audio::wav::read_mono(&rig::spoken_wav(dir, "reply", None, REPLY_TEXT))
                .unwrap();
        let reply = scaled(
            &resample(&reply.samples, reply.rate, 24_000),
            24_000,
            REPLY_DBFS,
        );
        let phrase = livetalk::audio::wav::read_mono(&rig::spoken_wav(
            dir,
            "phrase",
            Some(PHRASE_VOICE),
            PHRASE_TEXT,
        ))
        .unwrap();
        let loud = scaled(
            &phrase.samples,
            phrase.rate,
            REPLY_DBFS + PHRASE_OVER_ECHO_DB,
        );
        let phrase_wav = dir.join("phrase-over-echo.wav");
        write_wav(&phrase_wav, phrase.rate, &loud);
        let wire = resample(&loud, phrase.rate, WIRE_RATE);
        let (start, end) = rig::sound_span(&wire, WIRE_RATE, 0.01).unwrap();
        let (start, end) = (
            (start * f64::from(WIRE_RATE)) as usize,
            ((end * f64::from(WIRE_RATE)) as usize).min(wire.len()),
        );
        Script {
            reply_wire: resample(&reply, 24_000, WIRE_RATE),
            reply: Arc::new(to_pcm16(&reply)),
            phrase_wav,
            phrase_reference: wire[start..end].to_vec(),
            phrase_lead: start,
        }
    }

    fn reply_secs(&self) -> f64 {
        self.reply.len() as f64 / 24_000.0
    }
}

/// What the fake server heard.
#[derive(Default)]
struct Heard {
    /// Every `realtimeInput.audio` chunk, in order.
    samples: Vec<i16>,
    /// When the mic's capture clock read sample 0, as the arrivals bound it (see
    /// [`Heard::arrived`]).
    clock: Option<Instant>,
    /// When the user's turn arrived (the reply began to stream).
    turn_at: Option<Instant>,
    /// When each chunk arrived, and the samples received with it.
    arrivals: Vec<(Instant, usize)>,
}

impl Heard {
    /// Takes a chunk of mic audio that arrived now. A chunk arrives after its last sample was
    /// captured, so `now - (samples so far) / rate` is never earlier than when sample 0 was
    /// captured; the earliest such bound (from the chunk that came quickest) dates the capture
    /// clock.
    /// Counting what has arrived would not do: a client whose processing falls behind sends
    /// the same audio later, and the count would lag the room by that much.
    fn arrived(&mut self, chunk: impl Iterator<Item = i16>, now: Instant) {
        self.samples.extend(chunk);
        self.arrivals.push((now, self.samples.len()));
        let captured = Duration::from_secs_f64(self.samples.len() as f64 / f64::from(WIRE_RATE));
        if let Some(start) = now.checked_sub(captured) {
            self.clock = Some(self.clock.map_or(start, |c| c.min(start)));
        }
    }

    /// The sample the mic was capturing at `at`, or a little earlier (the clock is dated late
    /// by the quickest chunk's trip).
    fn sample_at(&self, at: Instant) -> usize {
        let clock = self.clock.expect("mic audio arrived");
        (at.saturating_duration_since(clock).as_secs_f64() * f64::from(WIRE_RATE)) as usize
    }

    /// How far behind the capture clock each chunk arrived, until `until` (seconds): one
    /// frame and the client's processing, a backlog being caught up, or audio that was lost.
    fn lateness(&self, until: Instant) -> Vec<(Instant, f64)> {
        self.arrivals
            .iter()
            .take_while(|(at, _)| *at <= until)
            .map(|&(at, received)| {
                let behind = self.sample_at(at).saturating_sub(received);
                (at, behind as f64 / f64::from(WIRE_RATE))
            })
            .collect()
    }

    /// Mic audio that never reached the server until `until` (seconds): a backlog is caught
    /// up, lost audio leaves every later chunk that much further behind, even the quickest.
    fn lost(&self, until: Instant) -> f64 {
        let lateness = self.lateness(until);
        let (Some(&(first, _)), Some(&(last, _))) = (lateness.first(), lateness.last()) else {
            return 0.0;
        };
        let quickest = |from: Instant, to: Instant| {
            lateness
                .iter()
                .filter(|(at, _)| (from..=to).contains(at))
                .map(|&(_, behind)| behind)
                .fold(f64::INFINITY, f64::min)
        };
        let second = Duration::from_secs(1);
        let last_second = last.checked_sub(second).unwrap_or(first);
        (quickest(last_second, last) - quickest(first, first + second)).max(0.0)
    }
}

/// A fake Live server for one connection: `setupComplete`; at the first `clientContent` the
/// reply streamed in 40 ms chunks four times faster than real time, then `turnComplete`
/// (never `interrupted`); all the while it keeps the mic audio it receives.
async fn fake_live(reply: Arc<Vec<i16>>, heard: Arc<Mutex<Heard>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let (sink, mut stream) = ws.split();
        let mut sink = Some(sink);
        let _setup = stream.next().await.unwrap().unwrap();
        if let Some(sink) = &mut sink {
            sink.send(Message::text("{\"setupComplete\":{}}"))
                .await
                .unwrap();
        }
        while let Some(Ok(message)) = stream.next().await {
            let Ok(text) = message.to_text() else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
                continue;
            };
            let audio = &value["realtimeInput"]["audio"];
            if let Some(data) = audio["data"].as_str() {
                assert_eq!(audio["mimeType"], "audio/pcm;rate=16000");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap();
                heard.lock().unwrap().arrived(
                    bytes
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]])),
                    Instant::now(),
                );
            } else if value.get("clientContent").is_some()
                && let Some(sink) = sink.take()
            {
                heard.lock().unwrap().turn_at = Some(Instant::now());
                tokio::spawn(stream_reply(sink, reply.clone()));
            }
        }
    });
    url
}

async fn stream_reply(
    mut sink: futures_util::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
        Message,
    >,
    reply: Arc<Vec<i16>>,
) {
    for chunk in reply.chunks(960) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        let frame = format!(
            "{{\"serverContent\":{{\"modelTurn\":{{\"parts\":[{{\"inlineData\":{{\"mimeType\":\"audio/pcm;rate=24000\",\"data\":\"{data}\"}}}}]}}}}}}"
        );
        if sink.send(Message::text(frame)).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = sink
        .send(Message::text("{\"serverContent\":{\"turnComplete\":true}}"))
        .await;
    // Keep the sink (and so the connection) open until the client leaves.
    std::future::pending::<()>().await;
}

/// `livetalk --headless --json` with `--echo mode` on the rig's virtual mic and speaker, all
/// pipes open; against `endpoint`, or the offline demo model. [`SYSTEM`] is `--echo off` on
/// the sound server's canceller's devices (loaded by the caller).
fn headless_on_rig(rig: &PulseRig, scratch: &Path, endpoint: Option<&str>, echo: &str) -> Child {
    let route = match endpoint {
        Some(url) => vec!["--endpoint", url],
        None => vec!["--offline"],
    };
    let (devices, echo) = match echo {
        SYSTEM => (rig::SYSTEM_CANCELLER_DEVICES, "off"),
        echo => (rig::RIG_DEVICES, echo),
    };
    rig.headless_on(
        scratch,
        devices,
        &[&route[..], &["--json", "--echo", echo]].concat(),
    )
}

/// Fails a run whose speaker never played the reply, with what the client said of it.
fn silent_speaker(
    client: Child,
    stdin: std::process::ChildStdin,
    stderr: &mpsc::Receiver<String>,
    echo: &str,
) -> ! {
    drop(stdin);
    let status = common::wait_exit(client, Duration::from_secs(20));
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    panic!(
        "--echo {echo}: the reply was never heard from the speaker; livetalk {status}:\n{stderr}"
    );
}

/// Waits (polling, up to `timeout`) until the fake server has heard `samples` of mic audio.
fn wait_heard(heard: &Mutex<Heard>, samples: usize, timeout: Duration) {
    let enough = common::poll(timeout, Duration::from_millis(20), || {
        (heard.lock().unwrap().samples.len() >= samples).then_some(())
    });
    assert!(enough.is_some(), "the fake server heard no mic audio");
}

/// One conversation with the fake server, as it received it.
struct Conversation {
    /// The 16 kHz mic audio.
    received: Vec<f32>,
    /// The sample the mic was capturing when the reply began to stream, and when the phrase
    /// began to play.
    reply_at: usize,
    phrase_at: usize,
    /// How far behind the room the mic audio reached the server, at worst until the reply was
    /// over, in seconds: a frame and the client's processing, or a backlog.
    behind: f64,
    /// Seconds of mic audio that never reached it.
    lost: f64,
    /// The client's own audio figures (its `audio` event).
    summary: serde_json::Value,
}

/// Types a line; 3 s after the reply is heard, speaks the phrase into the mic; ends after the
/// reply has played.
fn converse(
    rig: &PulseRig,
    runtime: &tokio::runtime::Runtime,
    script: &Script,
    echo: &str,
) -> Conversation {
    let scratch = rig::audio_scratch();
    let heard = Arc::new(Mutex::new(Heard::default()));
    let url = runtime.block_on(fake_live(script.reply.clone(), heard.clone()));
    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    let mut client = headless_on_rig(rig, scratch.path(), Some(&url), echo);
    let stdout = common::read_all(client.stdout.take().unwrap());
    let stderr = common::read_all(client.stderr.take().unwrap());
    let mut stdin = client.stdin.take().unwrap();
    // The mic streams before the user turn, as it does in a conversation.
    wait_heard(&heard, WIRE_RATE as usize / 2, Duration::from_secs(20));
    writeln!(stdin, "How was your day?").unwrap();
    stdin.flush().unwrap();

    let Some(reply_heard) = recording.wait_for_sound(0.01, Duration::from_secs(20)) else {
        silent_speaker(client, stdin, &stderr, echo)
    };
    recording.wait_for_len(reply_heard + (PHRASE_AFTER * f64::from(RECORD_RATE)) as usize);
    let phrase_started = Instant::now();
    let mut paplay = rig.play_into_mic(&script.phrase_wav);
    assert!(paplay.wait().unwrap().success(), "paplay failed");
    let phrase_over = recording.len();
    // The whole reply, and a little of what follows.
    recording.wait_for_len(
        reply_heard + ((script.reply_secs() + 0.5) * f64::from(RECORD_RATE)) as usize,
    );
    let ended = Instant::now();
    drop(stdin);
    let status = common::wait_exit(client, Duration::from_secs(20));
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    let stdout = stdout
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    assert!(
        status.success(),
        "--echo {echo}: exit {status}\n{stdout}\n{stderr}"
    );
    let played = recording.stop();
    let (_, reply_end) = rig::sound_span(&played, RECORD_RATE, 0.01).unwrap();
    assert!(
        reply_end * f64::from(RECORD_RATE) > phrase_over as f64,
        "--echo {echo}: the reply ended before the phrase did: there was no double talk"
    );
    let heard = std::mem::take(&mut *heard.lock().unwrap());
    let phrase_at = heard.sample_at(phrase_started);
    let summary = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "audio")
        .unwrap_or_else(|| panic!("--echo {echo}: no audio summary in {stdout}"));
    Conversation {
        reply_at: heard.sample_at(heard.turn_at.expect("the fake server streamed the reply")),
        phrase_at,
        behind: heard
            .lateness(ended)
            .iter()
            .map(|&(_, behind)| behind)
            .fold(0.0, f64::max),
        lost: heard.lost(ended),
        received: from_pcm16(&heard.samples),
        summary,
    }
}

/// [`converse`] once, and whether it can be measured: every figure places the reply and the
/// phrase in the mic audio by the capture clock, so a run in which some of it never reached
/// the server (a client starved of CPU, whose device overran) is said to be unmeasurable.
fn try_conversation(
    rig: &PulseRig,
    runtime: &tokio::runtime::Runtime,
    script: &Script,
    echo: &str,
) -> Result<Conversation, String> {
    let label = rig.label();
    let conversation = converse(rig, runtime, script, echo);
    let summary = &conversation.summary;
    let account = format!(
        "mic audio at worst {:.2} s behind the room, {:.3} s of it lost; client: {} frames \
         dropped, {} mic samples overflowed, {} ms of mic gaps filled, {} underruns",
        conversation.behind,
        conversation.lost,
        summary["frames_dropped"],
        summary["mic_overflow_samples"],
        summary["mic_gaps_ms"],
        summary["underruns"]
    );
    eprintln!("{label}, --echo {echo}: {account}");
    let most = if echo == SYSTEM {
        MAX_LOST_SYSTEM
    } else {
        MAX_LOST
    };
    if conversation.lost < most {
        Ok(conversation)
    } else {
        Err(format!(
            "mic audio lost on the way to the server ({account})"
        ))
    }
}

/// Figures of one echo mode, measured on what the fake server received.
struct Measured {
    /// Mean power from the first reply audio until the phrase begins to play, in dBFS.
    echo_dbfs: f64,
    /// That power in half-second steps, in dBFS.
    echo_profile: Vec<f64>,
    /// Mean power from shortly after the phrase until the reply ends, in dBFS.
    echo_after_dbfs: f64,
    phrase: rig::Found,
}

/// The power of PCM16 audio from the wire, in dBFS, no lower than one step of 16 bits: a
/// canceller that sends digital silence (the system's does, while only the echo is heard) has
/// taken the echo below what the wire can carry, not infinitely far.
fn wire_power_dbfs(samples: &[f32]) -> f64 {
    rig::power_dbfs(samples).max(20.0 * (1.0f64 / 32_768.0).log10())
}

fn measure(conversation: &Conversation, script: &Script) -> Measured {
    let Conversation {
        received,
        reply_at,
        phrase_at,
        ..
    } = conversation;
    let echo = &received[*reply_at..*phrase_at];
    let echo_profile = echo
        .chunks(WIRE_RATE as usize / 2)
        .map(wire_power_dbfs)
        .collect();
    // The phrase cannot have been captured before it began to play: it starts at or after
    // `phrase_at` (plus the silence that opens its file), up to paplay's start and the capture path's latency
    // later.
    let onset = phrase_at + script.phrase_lead;
    let search_from = onset.saturating_sub(WIRE_RATE as usize / 50);
    let search_to = onset + WIRE_RATE as usize;
    let reference = &script.phrase_reference;
    assert!(
        received.len() > search_to + reference.len() + WIRE_RATE as usize / 2,
        "the mic stopped streaming: {} samples received, the phrase ends near {}",
        received.len(),
        onset + reference.len()
    );
    let phrase = rig::find_in_pieces(
        received,
        reference,
        search_from,
        search_to,
        PHRASE_PIECE,
        PHRASE_PIECE_SLACK,
    );
    // From 200 ms after the phrase until the reply ends (its echo as far as the wire goes).
    let reply_end = reply_at + (script.reply_secs() * f64::from(WIRE_RATE)) as usize;
    let after_from = phrase.at + reference.len() + WIRE_RATE as usize / 5;
    let echo_after_dbfs = if reply_end > after_from + WIRE_RATE as usize / 2 {
        wire_power_dbfs(&received[after_from..reply_end.min(received.len())])
    } else {
        f64::NAN
    };
    Measured {
        echo_dbfs: wire_power_dbfs(echo),
        echo_profile,
        echo_after_dbfs,
        phrase,
    }
}

/// Where each second of the reply's echo is in the mic audio of an `off` run, in ms after the
/// reply began to stream, with its correlation: a room is one fixed delay, and a canceller
/// cannot be asked to follow a rig whose delay moves.
fn echo_delays(conversation: &Conversation, script: &Script) -> Vec<(f64, f64)> {
    let second = WIRE_RATE as usize;
    script
        .reply_wire
        .chunks_exact(second)
        .enumerate()
        .map(|(n, block)| {
            let from = conversation.reply_at + n * second;
            let found = rig::find(&conversation.received, block, from, from + second / 2);
            (
                (found.at - from) as f64 * 1000.0 / f64::from(WIRE_RATE),
                found.correlation,
            )
        })
        .collect()
}

fn profile(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a mode did against the `off` run of the same rig.
struct Figures {
    /// Echo taken out from the first reply audio until the phrase, in dB.
    suppression: f64,
    /// The echo left over that span, in dBFS (no lower than one 16-bit step).
    echo_left: f64,
    /// How much the phrase that arrived looks like the one spoken.
    correlation: f64,
    /// The phrase's level against `off`'s, in dB.
    phrase_level: f64,
}

/// `measured` against `off`, printed with the echo left in half-second steps.
fn figures(label: &str, mode: &str, off: &Measured, measured: &Measured) -> Figures {
    let suppression = off.echo_dbfs - measured.echo_dbfs;
    let after = off.echo_after_dbfs - measured.echo_after_dbfs;
    let phrase_level = db(measured.phrase.gain / off.phrase.gain);
    let correlation = measured.phrase.correlation;
    let per_half_second: Vec<f64> = off
        .echo_profile
        .iter()
        .zip(&measured.echo_profile)
        .map(|(o, m)| o - m)
        .collect();
    eprintln!(
        "{label}, --echo {mode}: echo suppressed {suppression:.1} dB from the first reply audio \
         until the phrase ({:.1} dBFS left; per 0.5 s: {} dB), {after:.1} dB after it; phrase \
         correlation {correlation:.3}, level {phrase_level:+.1} dB vs off",
        measured.echo_dbfs,
        profile(&per_half_second),
    );
    Figures {
        suppression,
        echo_left: measured.echo_dbfs,
        correlation,
        phrase_level,
    }
}

/// The rig with the room (devices at `rate`, reached through `host`), the conversation's
/// sounds (in the returned folder) and a runtime for the fake server.
fn echo_room(
    rate: u32,
    host: RigHost,
) -> (PulseRig, tempfile::TempDir, Script, tokio::runtime::Runtime) {
    let rig = PulseRig::launch(RigSetup {
        rate,
        acoustic_delay: Some(ACOUSTIC_DELAY),
        host,
        ..RigSetup::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let script = Script::new(dir.path());
    (rig, dir, script, tokio::runtime::Runtime::new().unwrap())
}

/// The `off` run, the baseline: the room is really there (the echo as loud as the reply was
/// played) and the phrase gets through an open mic; the other modes' figures are measured
/// against it.
fn off_holds(
    label: &str,
    conversation: &Conversation,
    measured: &Measured,
    script: &Script,
) -> Result<(), String> {
    let echo = &conversation.received[conversation.reply_at..conversation.phrase_at];
    // No speech in it at all is as far from the room as can be.
    let echo_level =
        livetalk::audio::pcm::speech_level_dbfs(echo, WIRE_RATE).unwrap_or(f64::NEG_INFINITY);
    eprintln!(
        "{label}, --echo off: echo {echo_level:.1} dBFS while heard (reply played at \
         {REPLY_DBFS:.1}), mean {:.1} dBFS until the phrase, {:.1} dBFS after it; phrase \
         correlation {:.3}, level {:.1} dB of as played, {:.2} s after it began to play",
        measured.echo_dbfs,
        measured.echo_after_dbfs,
        measured.phrase.correlation,
        db(measured.phrase.gain),
        (measured.phrase.at as f64 - (conversation.phrase_at + script.phrase_lead) as f64)
            / f64::from(WIRE_RATE),
    );
    let delays = echo_delays(conversation, script);
    eprintln!(
        "{label}, --echo off: the echo of each second of the reply, ms after it began to \
         stream (correlation): {}",
        delays
            .iter()
            .map(|(ms, c)| format!("{ms:.1} ({c:.2})"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // (Not an upper bound: `off` runs the noise suppressor, which may lift the level.)
    if echo_level <= REPLY_DBFS - 3.0 {
        return Err(format!(
            "the echo is at {echo_level:.1} dBFS, the reply was played at {REPLY_DBFS:.1}: is \
             the room there?"
        ));
    }
    if measured.phrase.correlation <= 0.5 {
        return Err(format!(
            "with the mic open the phrase correlates only {:.3}",
            measured.phrase.correlation
        ));
    }
    Ok(())
}

/// A mode's bars against the `off` run's figures, and the client's account of its voice
/// processing in its closing summary.
fn mode_holds(
    label: &str,
    mode: &str,
    off: &Measured,
    conversation: &Conversation,
    measured: &Measured,
) -> Result<(), String> {
    let Figures {
        suppression,
        correlation,
        phrase_level,
        ..
    } = figures(label, mode, off, measured);
    let reported = &conversation.summary["echo"];
    eprintln!("{label}, --echo {mode}: the client reported {reported}");
    assert_eq!(reported["mode"], mode, "{reported}");
    assert_eq!(reported["cancelling"], mode == "aec", "{reported}");
    let missed = match mode {
        "aec" if suppression < MIN_ECHO_SUPPRESSION_DB => Some(format!(
            "echo suppressed {suppression:.1} dB, needs {MIN_ECHO_SUPPRESSION_DB}"
        )),
        "aec" if correlation < MIN_PHRASE_CORRELATION => Some(format!(
            "the phrase correlates {correlation:.3}, needs {MIN_PHRASE_CORRELATION}"
        )),
        "aec" if phrase_level < -MAX_PHRASE_LOSS_DB => Some(format!(
            "the phrase arrives {phrase_level:.1} dB below off's"
        )),
        "aec" => None,
        "gate"
            if phrase_level > -MIN_GATE_PHRASE_CUT_DB
                || correlation >= MAX_GATE_PHRASE_CORRELATION =>
        {
            Some(format!(
                "the gate let the phrase through ({phrase_level:.1} dB vs off, correlation \
                 {correlation:.3})"
            ))
        }
        "gate" => None,
        other => panic!("no bars for --echo {other}"),
    };
    missed.map_or(Ok(()), Err)
}

/// Runs `modes` (`off` first: the baseline) on a rig whose devices run at `rate`, reached
/// through `host`; checks and prints the figures.
fn echo_figures_at(rate: u32, host: RigHost, modes: &[&str]) {
    assert_eq!(modes.first(), Some(&"off"), "off is the baseline");
    let started = Instant::now();
    let (rig, _dir, script, runtime) = echo_room(rate, host);
    let label = rig.label();
    if let Some(dir) = std::env::var_os("ECHO_RIG_SAVE") {
        let reply = from_pcm16(&script.reply);
        write_wav(
            &Path::new(&dir).join("reply-16k.wav"),
            WIRE_RATE,
            &resample(&reply, 24_000, WIRE_RATE),
        );
    }
    let mut baseline: Option<Measured> = None;
    let phrase = rig::player_name(&script.phrase_wav);
    for &mode in modes {
        // A run that misses a bar is repeated once, and only when the sound server's log
        // shows the rig itself lost audio (the phrase's player ran dry, the room re-timed).
        let measured = rig::once_more_if_the_server_lost_audio(
            &rig,
            &format!("{label}, --echo {mode}"),
            &[&phrase],
            || {
                let conversation = try_conversation(&rig, &runtime, &script, mode)?;
                // For a closer look at a figure: what the server received, as a WAV per rate
                // and mode.
                if let Some(dir) = std::env::var_os("ECHO_RIG_SAVE") {
                    let path = Path::new(&dir).join(format!("received-{rate}-{host:?}-{mode}.wav"));
                    write_wav(&path, WIRE_RATE, &conversation.received);
                    eprintln!(
                        "{}: the reply began to stream at sample {}, the phrase to play at {}",
                        path.display(),
                        conversation.reply_at,
                        conversation.phrase_at,
                    );
                }
                let measured = measure(&conversation, &script);
                match &baseline {
                    None => off_holds(&label, &conversation, &measured, &script)?,
                    Some(off) => mode_holds(&label, mode, off, &conversation, &measured)?,
                }
                Ok(measured)
            },
        );
        baseline.get_or_insert(measured);
    }
    eprintln!(
        "{label}: {} runs in {:.1} s",
        modes.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn at_48khz_aec_suppresses_the_echo_and_lets_the_phrase_through_and_gate_cuts_it() {
    echo_figures_at(48_000, RigHost::PulseAudio, &["off", "aec", "gate"]);
}

#[test]
fn at_44_1khz_aec_suppresses_the_echo_and_lets_the_phrase_through() {
    echo_figures_at(44_100, RigHost::PulseAudio, &["off", "aec"]);
}

/// The other audio host: ALSA, through its PulseAudio plugin, whose mic timestamps claim
/// over half a second of latency for their first second.
#[test]
fn through_alsa_aec_suppresses_the_echo_and_lets_the_phrase_through() {
    echo_figures_at(48_000, RigHost::Alsa, &["off", "aec"]);
}

/// The median (nearest rank, as `livetalk check` reports its percentiles).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    livetalk::check::report::percentile(values, 0.5).unwrap_or(f64::NAN)
}

/// livetalk's canceller beside the sound server's own (PulseAudio's `module-echo-cancel`, the
/// WebRTC canceller with its defaults, livetalk's off) on the same rig, in interleaved rounds
/// (`off`, then the two in turn, the order alternating): each round's figures against that
/// round's `off`, then the medians. livetalk's medians must be at least the system's, and no
/// run of livetalk's under the rig's bars. A measurement, not a test of the suite: rounds
/// from `ECHO_ROUNDS` (5), the ALSA host with `ECHO_HOST=alsa`. The system canceller's source
/// often falls behind the room by a second or more (its own buffering; void runs, even on an
/// idle machine), and an `off` that lost the phrase measures nothing: such a round is left
/// out and another run, up to twice the rounds asked for, until each mode has its count.
#[test]
#[ignore = "a measurement of several minutes on a quiet machine: ECHO_ROUNDS=5 cargo nextest run \
            --test echo_rig --run-ignored only -E 'test(system_canceller)' --no-capture"]
fn aec_against_the_system_canceller() {
    let rounds: usize = std::env::var("ECHO_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let host = match std::env::var("ECHO_HOST").as_deref() {
        Ok("alsa") => RigHost::Alsa,
        _ => RigHost::PulseAudio,
    };
    let (rig, _dir, script, runtime) = echo_room(48_000, host);
    let label = rig.label();
    let mut runs: Vec<(&str, Figures)> = Vec::new();
    let count =
        |runs: &[(&str, Figures)], mode: &str| runs.iter().filter(|(m, _)| *m == mode).count();
    for round in 0..rounds * 2 {
        if count(&runs, "aec") >= rounds && count(&runs, SYSTEM) >= rounds {
            break;
        }
        eprintln!("{label}: round {}", round + 1);
        let Some(off) = try_conversation(&rig, &runtime, &script, "off")
            .ok()
            .map(|c| measure(&c, &script))
            .filter(|off| off.phrase.correlation > 0.5)
        else {
            eprintln!(
                "{label}: round {} void: no `off` with the phrase in it",
                round + 1
            );
            continue;
        };
        let order = if round.is_multiple_of(2) {
            ["aec", SYSTEM]
        } else {
            [SYSTEM, "aec"]
        };
        for mode in order {
            if count(&runs, mode) >= rounds {
                continue;
            }
            // Loaded for its run only, and so cold at its start, as livetalk's is.
            let module = (mode == SYSTEM).then(|| rig.load_system_canceller());
            // A run the system canceller's lag made the harness give up on (its fake server
            // waits a bounded time for the phrase) is void as well.
            let conversation = if mode == SYSTEM {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    try_conversation(&rig, &runtime, &script, mode).ok()
                }))
                .ok()
                .flatten()
            } else {
                try_conversation(&rig, &runtime, &script, mode).ok()
            };
            if let Some(module) = module {
                rig.unload_system_canceller(module);
            }
            match conversation {
                Some(conversation) => {
                    let measured = measure(&conversation, &script);
                    runs.push((mode, figures(&label, mode, &off, &measured)));
                }
                None => eprintln!("{label}, --echo {mode}: round {} void", round + 1),
            }
        }
    }
    for mode in ["aec", SYSTEM] {
        assert!(
            count(&runs, mode) >= rounds,
            "{label}, --echo {mode}: {} valid runs of {rounds} in {} rounds: the machine is too \
             busy for this rig",
            count(&runs, mode),
            rounds * 2
        );
    }
    let of = |mode: &str, figure: fn(&Figures) -> f64| -> Vec<f64> {
        runs.iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, f)| figure(f))
            .collect()
    };
    let suppression = |f: &Figures| f.suppression;
    let correlation = |f: &Figures| f.correlation;
    let level = |f: &Figures| f.phrase_level;
    let left = |f: &Figures| f.echo_left;
    for mode in ["aec", SYSTEM] {
        eprintln!(
            "{label}, {mode}, {} runs: echo suppressed {} dB (median {:.1}, {:.1} dBFS left); \
             phrase correlation {} (median {:.3}); phrase level {} dB vs off (median {:+.1})",
            count(&runs, mode),
            profile(&of(mode, suppression)),
            median(&mut of(mode, suppression)),
            median(&mut of(mode, left)),
            of(mode, correlation)
                .iter()
                .map(|c| format!("{c:.3}"))
                .collect::<Vec<_>>()
                .join(" "),
            median(&mut of(mode, correlation)),
            profile(&of(mode, level)),
            median(&mut of(mode, level)),
        );
    }
    // The echo is compared as what is left of it: each suppression figure is taken against
    // its own round's `off`, and a void run leaves the two modes' medians from different
    // rounds, a tenth of a dB apart where both left nothing a 16-bit wire carries.
    let aec = (
        median(&mut of("aec", left)),
        median(&mut of("aec", correlation)),
    );
    let system = (
        median(&mut of(SYSTEM, left)),
        median(&mut of(SYSTEM, correlation)),
    );
    assert!(
        aec.0 <= system.0 && aec.1 >= system.1,
        "{label}: livetalk's medians ({:.1} dBFS of echo left, correlation {:.3}) fall short of \
         the system canceller's ({:.1} dBFS, {:.3})",
        aec.0,
        aec.1,
        system.0,
        system.1
    );
    let worst = (
        of("aec", suppression)
            .into_iter()
            .fold(f64::INFINITY, f64::min),
        of("aec", correlation)
            .into_iter()
            .fold(f64::INFINITY, f64::min),
    );
    assert!(
        worst.0 >= MIN_ECHO_SUPPRESSION_DB && worst.1 >= MIN_PHRASE_CORRELATION,
        "{label}: livetalk's worst run: {:.1} dB, {:.3}",
        worst.0,
        worst.1
    );
}

/// The first `model` event: when it arrived, its status and whether echo was suspected.
fn model_turn(lines: &mut LineWatcher, timeout: Duration) -> (Instant, (String, bool)) {
    let (at, line) = lines.wait_for_arrival(timeout, |l| model_status(l).is_some());
    (at, model_status(&line).expect("a model event"))
}

/// How a turn ended, from a `model` event: its status and whether livetalk suspected its
/// own echo of the interruption; `None` for other events.
fn model_status(line: &str) -> Option<(String, bool)> {
    let event: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
    (event["type"] == "model").then(|| {
        (
            event["status"].as_str().unwrap_or_default().to_owned(),
            event["echo_suspected"] == true,
        )
    })
}

/// How the offline demo model's first reply went.
struct DemoTurn {
    status: String,
    /// livetalk flagged the interruption as its own echo's doing.
    echo_suspected: bool,
    /// From the reply first heard until its turn ended (the status arrived).
    turn: Duration,
    /// From the phrase beginning to play until the turn ended.
    after_phrase: Option<Duration>,
    /// Whether the speaker was playing the reply in the second before the phrase began.
    playing_before_phrase: bool,
    /// Seconds the speaker went on playing after the phrase was over.
    played_after_phrase: f64,
}

/// Asks the offline demo model for help (a long spoken reply) on the rig; with `phrase`, speaks
/// it into the mic 3 s after the reply is first heard.
fn demo_turn(rig: &PulseRig, echo: &str, phrase: Option<&Path>) -> DemoTurn {
    let scratch = rig::audio_scratch();
    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    let mut client = headless_on_rig(rig, scratch.path(), None, echo);
    let mut lines = LineWatcher::new(client.stdout.take().unwrap());
    let stderr = common::read_all(client.stderr.take().unwrap());
    let mut stdin = client.stdin.take().unwrap();
    writeln!(stdin, "help").unwrap();
    stdin.flush().unwrap();
    let Some(reply_heard) = recording.wait_for_sound(0.01, Duration::from_secs(30)) else {
        silent_speaker(client, stdin, &stderr, echo)
    };
    let heard_at = Instant::now();
    let mut phrase_play = None;
    if let Some(phrase) = phrase {
        recording.wait_for_len(reply_heard + (PHRASE_AFTER * f64::from(RECORD_RATE)) as usize);
        if let Some(line) = lines.arrived().iter().find(|l| model_status(l).is_some()) {
            panic!("--echo {echo}: the turn ended before the phrase began: {line}");
        }
        phrase_play = Some((recording.len(), Instant::now(), rig.play_into_mic(phrase)));
    }
    // The help reply is long (about 25 s); its turn ends early only if it is interrupted.
    let (ended, (status, echo_suspected)) = model_turn(&mut lines, Duration::from_secs(60));
    let mut phrase_over = None;
    if let Some((_, _, paplay)) = &mut phrase_play {
        assert!(paplay.wait().unwrap().success(), "paplay failed");
        phrase_over = Some(recording.len());
    }
    drop(stdin);
    if status == "interrupted" {
        // The model answers what it heard; that is not what is measured here.
        let _ = client.kill();
    }
    let exit = common::wait_exit(client, Duration::from_secs(20));
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    assert!(
        status == "interrupted" || exit.success(),
        "--echo {echo}: exit {exit}\n{stderr}"
    );
    recording.wait_for_more(0.3);
    let played = recording.stop();
    let loud = rig::loud_windows(&played, RECORD_RATE, 0.01);
    let window = (RECORD_RATE / 100) as usize;
    let playing_before_phrase = phrase_play.as_ref().is_some_and(|(at, _, _)| {
        loud[(at / window).saturating_sub(100)..(at / window).min(loud.len())]
            .iter()
            .any(|&l| l)
    });
    let played_after_phrase = phrase_over.map_or(0.0, |over| {
        let last = loud.iter().rposition(|&l| l).unwrap_or(0) + 1;
        (last * window) as f64 / f64::from(RECORD_RATE) - over as f64 / f64::from(RECORD_RATE)
    });
    DemoTurn {
        status,
        echo_suspected,
        turn: ended.duration_since(heard_at),
        after_phrase: phrase_play.map(|(_, at, _)| ended.saturating_duration_since(at)),
        playing_before_phrase,
        played_after_phrase,
    }
}

#[test]
fn speaking_over_the_offline_demo_model_interrupts_it_with_aec_only() {
    let started = Instant::now();
    let rig = PulseRig::launch(RigSetup {
        acoustic_delay: Some(ACOUSTIC_DELAY),
        ..RigSetup::default()
    });
    let dir = tempfile::tempdir().unwrap();
    // As loud as the demo model's own espeak-ng voice, so about as loud as its echo.
    let phrase = rig::spoken_wav(dir.path(), "phrase", Some(PHRASE_VOICE), PHRASE_TEXT);

    // With the mic open the model hears itself through the room and stops at once.
    let off = demo_turn(&rig, "off", None);
    eprintln!(
        "--echo off: the demo model's turn ended {} {:.2} s after its reply was heard (echo \
         suspected: {})",
        off.status,
        off.turn.as_secs_f64(),
        off.echo_suspected
    );
    assert_eq!(off.status, "interrupted", "the model did not hear itself");
    assert!(off.turn < Duration::from_secs(3), "{:?}", off.turn);
    // The self-interruption detector tells: the model heard its own voice.
    assert!(
        off.echo_suspected,
        "the echo's interruption was not flagged as such"
    );

    let aec = demo_turn(&rig, "aec", Some(&phrase));
    let after = aec.after_phrase.unwrap();
    eprintln!(
        "--echo aec: the demo model's turn ended {} {:.2} s after the phrase began (echo \
         suspected: {})",
        aec.status,
        after.as_secs_f64(),
        aec.echo_suspected
    );
    assert!(
        aec.playing_before_phrase,
        "the reply was not playing when the phrase began"
    );
    assert_eq!(
        aec.status, "interrupted",
        "speaking over the model did not stop it"
    );
    assert!(
        after > Duration::from_millis(100) && after < Duration::from_secs(3),
        "interrupted {after:?} after the phrase began: not by the phrase"
    );
    assert!(
        !aec.echo_suspected,
        "the user's phrase interrupted the model, and livetalk blamed the echo"
    );

    let gate = demo_turn(&rig, "gate", Some(&phrase));
    eprintln!(
        "--echo gate: the demo model's turn ended {} {:.2} s after the phrase began, the \
         speaker playing {:.2} s after the phrase was over",
        gate.status,
        gate.after_phrase.unwrap().as_secs_f64(),
        gate.played_after_phrase
    );
    assert!(gate.playing_before_phrase);
    assert_eq!(
        gate.status, "complete",
        "the gate let the phrase interrupt the model"
    );
    // The demo model streams its reply four times faster than it is played and can only be
    // interrupted until it has sent all of it: that must have been well into the phrase, or
    // there was nothing left for the phrase to interrupt.
    assert!(
        gate.after_phrase.unwrap() > Duration::from_secs(1),
        "the model had sent its whole reply {:?} after the phrase began",
        gate.after_phrase
    );
    assert!(
        gate.played_after_phrase > 1.0,
        "the reply stopped {:.2} s after the phrase",
        gate.played_after_phrase
    );
    eprintln!(
        "demo model: 3 runs in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
