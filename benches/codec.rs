//! Criterion benches of the codec hot paths: a 20 ms mic chunk out, a 40 ms model audio frame in.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use livetalk::live::codec::{DecodedServerFrame, decode_server, encode_client, encode_server};
use livetalk::live::events::{SessionEvent, events_from, pcm16_from_le_bytes, pcm16_to_le_bytes};
use livetalk::live::wire::{
    Blob, ClientMessage, Content, INPUT_AUDIO_MIME, OUTPUT_AUDIO_MIME, Part, RealtimeInput,
    ServerContent, ServerMessage,
};

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

fn encode_mic_chunk(c: &mut Criterion) {
    let samples = tone(320, 16_000.0); // 20 ms at 16 kHz
    let mut group = c.benchmark_group("codec");
    group.throughput(Throughput::Bytes(640));
    group.bench_function(
        "encode 20 ms mic chunk (PCM16 -> base64 -> JSON text frame)",
        |b| {
            b.iter(|| {
                let message = ClientMessage::RealtimeInput(RealtimeInput {
                    audio: Some(Blob {
                        mime_type: INPUT_AUDIO_MIME.to_owned(),
                        data: pcm16_to_le_bytes(black_box(&samples)),
                    }),
                    ..RealtimeInput::default()
                });
                black_box(encode_client(&message))
            })
        },
    );
    group.finish();
}

fn decode_model_frame(c: &mut Criterion) {
    let samples = tone(960, 24_000.0); // 40 ms at 24 kHz
    let frame = encode_server(&ServerMessage {
        server_content: Some(ServerContent {
            model_turn: Some(Content {
                role: None,
                parts: vec![Part {
                    inline_data: Some(Blob {
                        mime_type: OUTPUT_AUDIO_MIME.to_owned(),
                        data: pcm16_to_le_bytes(&samples),
                    }),
                    ..Part::default()
                }],
            }),
            ..ServerContent::default()
        }),
        ..ServerMessage::default()
    });
    let mut group = c.benchmark_group("codec");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function(
        "decode 40 ms model audio frame (binary JSON -> PCM16)",
        |b| {
            b.iter(|| {
                let Ok(DecodedServerFrame::Message(message)) = decode_server(black_box(&frame))
                else {
                    panic!("the bench frame decodes");
                };
                for event in events_from(message) {
                    if let SessionEvent::ModelAudio { pcm, .. } = event {
                        black_box(pcm16_from_le_bytes(&pcm));
                    }
                }
            })
        },
    );
    group.finish();
}

criterion_group!(benches, encode_mic_chunk, decode_model_frame);
criterion_main!(benches);
