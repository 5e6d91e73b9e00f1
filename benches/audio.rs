//! Criterion benches of the audio paths: the capture path per 20 ms (48 kHz stereo f32 from
//! the device → downmix into the ring → 16 kHz → PCM16 → `realtimeInput` JSON frame) and the
//! playback path per 40 ms model chunk (PCM16 24 kHz → f32 → 48 kHz → ring → the output
//! callback filling 48 kHz stereo periods).

// A bench prints its own figures; it holds no secrets.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)] // a bench with a broken set-up should stop loudly

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use livetalk::audio::callbacks::{CaptureCallback, OutputCallback};
use livetalk::audio::pcm::{Framer, extend_f32_from_pcm16_le, extend_pcm16_le_from_f32};
use livetalk::audio::resample::StreamResampler;
use livetalk::audio::shared::{CaptureShared, Clock, PlaybackShared};
use livetalk::live::codec::encode_client;
use livetalk::live::wire::{ClientMessage, RealtimeInput};

fn speech_like(frames: usize, rate: f32, channels: usize) -> Vec<f32> {
    (0..frames)
        .flat_map(|i| {
            let t = i as f32 / rate;
            let s = 0.4 * (std::f32::consts::TAU * 220.0 * t).sin()
                + 0.2 * (std::f32::consts::TAU * 1370.0 * t).sin();
            std::iter::repeat_n(s, channels)
        })
        .collect()
}

fn capture_path(c: &mut Criterion) {
    let device = speech_like(960, 48_000.0, 2); // 20 ms, 48 kHz stereo
    let (producer, mut consumer) = rtrb::RingBuffer::new(48_000);
    let mut callback = CaptureCallback {
        producer,
        channels: 2,
        shared: Arc::new(CaptureShared::default()),
        clock: Clock::new(),
    };
    let mut resampler = StreamResampler::new(48_000, 16_000).unwrap();
    let mut framer = Framer::new(320);
    let mut mono = Vec::with_capacity(960);
    let mut resampled = Vec::with_capacity(400);
    let mut group = c.benchmark_group("audio");
    group.throughput(Throughput::Elements(960));
    group.bench_function(
        "capture 20 ms (48 kHz stereo f32 -> 16 kHz PCM16 -> JSON frame)",
        |b| {
            b.iter(|| {
                callback.process(black_box(&device[..]));
                mono.clear();
                let n = consumer.slots();
                let chunk = consumer.read_chunk(n).unwrap();
                let (a, b2) = chunk.as_slices();
                mono.extend_from_slice(a);
                mono.extend_from_slice(b2);
                chunk.commit_all();
                resampled.clear();
                resampler.push(&mono, &mut resampled);
                let mut frames = Vec::new();
                framer.push(&resampled, |frame| {
                    let mut pcm = Vec::with_capacity(640);
                    extend_pcm16_le_from_f32(frame, &mut pcm);
                    let message = ClientMessage::RealtimeInput(RealtimeInput::mic_audio(pcm));
                    frames.push(encode_client(&message));
                });
                black_box(frames)
            })
        },
    );
    group.finish();
}

fn playback_path(c: &mut Criterion) {
    let model: Vec<u8> = speech_like(960, 24_000.0, 1)
        .iter()
        .chain(speech_like(960, 24_000.0, 1).iter())
        .flat_map(|s| ((s * 32_767.0) as i16).to_le_bytes())
        .collect(); // 40 ms at 24 kHz
    let (mut producer, consumer) = rtrb::RingBuffer::new(48_000);
    let shared = Arc::new(PlaybackShared::default());
    let mut callback = OutputCallback::new(consumer, 2, 0, shared, Clock::new());
    let mut resampler = StreamResampler::new(24_000, 48_000).unwrap();
    let mut decoded = Vec::with_capacity(960);
    let mut resampled = Vec::with_capacity(2000);
    let mut period = vec![0.0f32; 480 * 2]; // 10 ms at 48 kHz stereo
    let mut group = c.benchmark_group("audio");
    group.throughput(Throughput::Elements(960));
    group.bench_function(
        "playback 40 ms (24 kHz PCM16 -> 48 kHz -> ring -> output callback, stereo)",
        |b| {
            b.iter(|| {
                decoded.clear();
                extend_f32_from_pcm16_le(black_box(&model), &mut decoded);
                resampled.clear();
                resampler.push(&decoded, &mut resampled);
                let n = resampled.len().min(producer.slots());
                let chunk = producer.write_chunk_uninit(n).unwrap();
                chunk.fill_from_iter(resampled.iter().copied());
                // Four 10 ms device periods play it out.
                for _ in 0..4 {
                    callback.process(&mut period[..]);
                }
                black_box(&period);
            })
        },
    );
    group.bench_function("output callback, one 10 ms period (48 kHz stereo)", |b| {
        b.iter(|| {
            if producer.slots() > 480 {
                let chunk = producer.write_chunk_uninit(480).unwrap();
                chunk.fill_from_iter(std::iter::repeat_n(0.25f32, 480));
            }
            callback.process(black_box(&mut period[..]));
        })
    });
    group.finish();
}

criterion_group!(benches, capture_path, playback_path);
criterion_main!(benches);
