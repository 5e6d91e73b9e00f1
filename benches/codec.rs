//! The codec hot paths, livetalk's beside the crates.io peer `gemini-live` 0.1.9 on the same
//! frames: a 20 ms 16 kHz mic chunk out as a JSON text frame, and a pretty-printed binary server
//! frame carrying 40 ms of 24 kHz audio in, down to its PCM bytes.
//!
//! `cargo bench --bench codec` first times the two codecs alternately (batches of each, one
//! after the other, so load from anything else on the machine falls on both alike) and prints
//! the medians and the ratio, then runs the same four paths as ordinary criterion benches.

// A bench prints its own figures; it holds no secrets.
#![allow(clippy::disallowed_macros)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gemini_live::audio::AudioEncoder;
use gemini_live::types::ServerEvent as PeerEvent;
use livetalk_live::codec::{DecodedServerFrame, decode_server, encode_client, encode_server};
use livetalk_live::events::{ServerEvent, events_from, pcm16_to_le_bytes};
use livetalk_live::wire::{
    Blob, ClientMessage, Content, OUTPUT_AUDIO_MIME, Part, RealtimeInput, ServerContent,
    ServerMessage,
};

/// Alternating batches per path, and calls per batch (the design notes' figures).
const BATCHES: usize = 41;
const CALLS_PER_BATCH: usize = 3_000;

/// A speech-like test signal (two tones), so base64 sees realistic byte variety.
fn tone(samples: usize, rate: f32) -> Vec<i16> {
    (0..samples)
        .map(|i| {
            let t = i as f32 / rate;
            let s = 0.4 * (2.0 * std::f32::consts::PI * 220.0 * t).sin()
                + 0.2 * (2.0 * std::f32::consts::PI * 1370.0 * t).sin();
            (s * f32::from(i16::MAX)) as i16
        })
        .collect()
}

/// The two inputs every path works on.
struct Frames {
    /// 20 ms of 16 kHz mono PCM16 LE, as the mic worker hands it over.
    mic_pcm: Vec<u8>,
    /// A model audio frame as the service sends it: pretty JSON in a binary frame.
    server_frame: Vec<u8>,
}

impl Frames {
    fn new() -> Self {
        let model_pcm = pcm16_to_le_bytes(&tone(960, 24_000.0)); // 40 ms at 24 kHz
        let server_frame = encode_server(&ServerMessage {
            server_content: Some(ServerContent {
                model_turn: Some(Content {
                    role: None,
                    parts: vec![Part {
                        inline_data: Some(Blob {
                            mime_type: OUTPUT_AUDIO_MIME.to_owned(),
                            data: model_pcm,
                        }),
                        ..Part::default()
                    }],
                }),
                ..ServerContent::default()
            }),
            ..ServerMessage::default()
        });
        Frames {
            mic_pcm: pcm16_to_le_bytes(&tone(320, 16_000.0)), // 20 ms at 16 kHz
            server_frame,
        }
    }
}

/// livetalk's send path: the engine moves the mic worker's bytes into a message, the socket
/// writer encodes it into the text frame it sends.
fn livetalk_encode(pcm: &[u8]) -> String {
    encode_client(&ClientMessage::RealtimeInput(RealtimeInput::mic_audio(
        pcm.to_vec(),
    )))
}

/// The peer's fastest public send path: its reusable `AudioEncoder`, then `encode_into` a
/// reused buffer.
struct PeerEncoder {
    audio: AudioEncoder,
    frame: Vec<u8>,
}

impl PeerEncoder {
    fn new() -> Self {
        PeerEncoder {
            audio: AudioEncoder::new(),
            frame: Vec::new(),
        }
    }

    fn encode(&mut self, pcm: &[u8]) -> &[u8] {
        use gemini_live::types::{Blob, ClientMessage, RealtimeInput};
        let data = self.audio.encode_i16_le(pcm).to_owned();
        let message = ClientMessage::RealtimeInput(RealtimeInput {
            audio: Some(Blob {
                data,
                mime_type: gemini_live::audio::INPUT_AUDIO_MIME.to_owned(),
            }),
            video: None,
            text: None,
            activity_start: None,
            activity_end: None,
            audio_stream_end: None,
        });
        gemini_live::codec::encode_into(&mut self.frame, &message).expect("the peer encodes");
        &self.frame
    }
}

/// livetalk's receive path: the socket reader decodes the frame and splits it into events.
fn livetalk_decode(frame: &[u8]) -> Vec<u8> {
    let Ok(DecodedServerFrame::Message(message)) = decode_server(frame) else {
        panic!("the bench frame decodes");
    };
    for event in events_from(message) {
        if let ServerEvent::ModelAudio { pcm, .. } = event {
            return pcm;
        }
    }
    panic!("the bench frame carries audio");
}

/// The peer's receive path, as its session runs it on a binary frame.
fn peer_decode(frame: &[u8]) -> impl AsRef<[u8]> {
    let text = std::str::from_utf8(frame).expect("the bench frame is UTF-8");
    let message = gemini_live::codec::decode(text).expect("the peer decodes");
    for event in gemini_live::codec::into_events(message) {
        if let PeerEvent::ModelAudio(pcm) = event {
            return pcm;
        }
    }
    panic!("the peer finds the audio");
}

/// Nanoseconds per call in one batch.
fn per_call(batch: Duration) -> f64 {
    batch.as_nanos() as f64 / CALLS_PER_BATCH as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Times `ours` and `peer` in alternating batches; returns (ours ns, peer ns, median ratio).
fn alternate(batches: usize, mut ours: impl FnMut(), mut peer: impl FnMut()) -> (f64, f64, f64) {
    let mut ours_ns = Vec::with_capacity(batches);
    let mut peer_ns = Vec::with_capacity(batches);
    let mut ratios = Vec::with_capacity(batches);
    let time = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..CALLS_PER_BATCH {
            f();
        }
        per_call(start.elapsed())
    };
    for batch in 0..batches {
        // Swap who goes first, so neither always runs on a warmer cache.
        let (o, p) = if batch % 2 == 0 {
            let o = time(&mut ours);
            (o, time(&mut peer))
        } else {
            let p = time(&mut peer);
            (time(&mut ours), p)
        };
        ours_ns.push(o);
        peer_ns.push(p);
        ratios.push(p / o);
    }
    (
        median(&mut ours_ns),
        median(&mut peer_ns),
        median(&mut ratios),
    )
}

/// The side-by-side figures: what docs/performance.md quotes.
fn side_by_side(frames: &Frames, batches: usize) {
    // Both codecs must agree on what they produce before their speed means anything.
    let mut peer = PeerEncoder::new();
    let json = |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes).expect("JSON");
    assert_eq!(
        json(livetalk_encode(&frames.mic_pcm).as_bytes()),
        json(peer.encode(&frames.mic_pcm)),
        "both codecs write the same mic frame (up to key order)"
    );
    assert_eq!(
        livetalk_decode(&frames.server_frame),
        peer_decode(&frames.server_frame).as_ref(),
        "both codecs find the same PCM"
    );

    println!(
        "codec, livetalk beside gemini-live 0.1.9: median of {batches} alternating batches x {CALLS_PER_BATCH} calls"
    );
    let (ours, theirs, ratio) = alternate(
        batches,
        || {
            black_box(livetalk_encode(black_box(&frames.mic_pcm)));
        },
        || {
            black_box(peer.encode(black_box(&frames.mic_pcm)));
        },
    );
    println!(
        "  send: 20 ms mic chunk -> JSON text frame ({} B PCM): livetalk {ours:.0} ns, gemini-live {theirs:.0} ns, {ratio:.2}x",
        frames.mic_pcm.len()
    );
    let (ours, theirs, ratio) = alternate(
        batches,
        || {
            black_box(livetalk_decode(black_box(&frames.server_frame)));
        },
        || {
            black_box(peer_decode(black_box(&frames.server_frame)));
        },
    );
    println!(
        "  recv: pretty binary frame ({} B, 40 ms of 24 kHz audio) -> PCM bytes: livetalk {ours:.0} ns, gemini-live {theirs:.0} ns, {ratio:.2}x",
        frames.server_frame.len()
    );
}

fn criterion_benches(c: &mut Criterion, frames: &Frames) {
    let mut group = c.benchmark_group("send 20 ms mic chunk");
    group.throughput(Throughput::Bytes(frames.mic_pcm.len() as u64));
    group.bench_function("livetalk", |b| {
        b.iter(|| livetalk_encode(black_box(&frames.mic_pcm)))
    });
    let mut peer = PeerEncoder::new();
    group.bench_function("gemini-live 0.1.9", |b| {
        b.iter(|| black_box(peer.encode(black_box(&frames.mic_pcm))).len())
    });
    group.finish();

    let mut group = c.benchmark_group("recv 40 ms model audio frame");
    group.throughput(Throughput::Bytes(frames.server_frame.len() as u64));
    group.bench_function("livetalk", |b| {
        b.iter(|| livetalk_decode(black_box(&frames.server_frame)))
    });
    group.bench_function("gemini-live 0.1.9", |b| {
        b.iter(|| peer_decode(black_box(&frames.server_frame)))
    });
    group.finish();
}

fn main() {
    let frames = Frames::new();
    let args: Vec<String> = std::env::args().collect();
    // A test runner listing the benches (`--list`) gets criterion's list and nothing else; run
    // as a test (no `--bench`), one quick batch proves the side-by-side works.
    if !args.iter().any(|a| a == "--list") {
        let benching = args.iter().any(|a| a == "--bench");
        side_by_side(&frames, if benching { BATCHES } else { 1 });
    }
    let mut c = Criterion::default().configure_from_args();
    criterion_benches(&mut c, &frames);
    c.final_summary();
}
