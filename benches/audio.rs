//! Criterion benches of the audio paths: the capture path per 20 ms (48 kHz stereo f32 from
//! the device → downmix into the ring → 16 kHz → PCM16 → `realtimeInput` JSON frame), the
//! playback path per 40 ms model chunk (PCM16 24 kHz → f32 → 48 kHz → ring → the output
//! callback filling 48 kHz stereo periods), and the mic's voice processing per 10 ms frame
//! (the speaker reference at 48 kHz → 16 kHz, then AEC3 and noise suppression on the mic).

// A bench prints its own figures; it holds no secrets.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)] // a bench with a broken set-up should stop loudly

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use livetalk::audio::EchoMode;
use livetalk::audio::aec::{EchoPath, FRAME};
use livetalk::audio::callbacks::{CaptureCallback, OutputCallback};
use livetalk::audio::pcm::{Framer, extend_f32_from_pcm16_le, extend_pcm16_le_from_f32};
use livetalk::audio::resample::StreamResampler;
use livetalk::audio::shared::{CaptureShared, Clock, PlaybackShared};
use livetalk_live::codec::encode_client;
use livetalk_live::wire::{ClientMessage, RealtimeInput};

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
        written: 0,
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
                callback.process(black_box(&device[..]), None);
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
    let (reference, mut played) = rtrb::RingBuffer::new(48_000);
    let mut callback = OutputCallback::new(consumer, reference, 2, 0, shared, Clock::new());
    // The worker's side of the echo reference: taken out as it would be.
    let mut drain = move || {
        let n = played.slots();
        played.read_chunk(n).unwrap().commit_all();
    };
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
                    callback.process(&mut period[..], None);
                }
                drain();
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
            callback.process(black_box(&mut period[..]), None);
            drain();
        })
    });
    group.finish();
}

/// One 10 ms frame of the mic's voice processing with the speaker playing and its echo in the
/// mic (a quieter copy 60 ms later), after a second to let the canceller lock on.
fn voice_processing(c: &mut Criterion) {
    let speaker = speech_like(48_000 * 3, 48_000.0, 1);
    let far_16k = speech_like(16_000 * 3, 16_000.0, 1);
    let mic: Vec<f32> = (0..far_16k.len())
        .map(|i| i.checked_sub(960).map_or(0.0, |j| far_16k[j] * 0.3))
        .collect();
    let silent = vec![0.0; speaker.len()];
    let mut group = c.benchmark_group("audio");
    group.throughput(Throughput::Elements(FRAME as u64));
    for (name, mode, noise_suppression, speaker) in [
        (
            "voice processing, one 10 ms frame (AEC3 + noise suppression)",
            EchoMode::Aec,
            true,
            &speaker,
        ),
        (
            "voice processing, one 10 ms frame (AEC3 only)",
            EchoMode::Aec,
            false,
            &speaker,
        ),
        (
            "voice processing, one 10 ms frame (noise suppression only)",
            EchoMode::Off,
            true,
            &speaker,
        ),
        (
            // The mic alone (someone talking) while the model is silent: AEC3 rests.
            "voice processing, one 10 ms frame, the speaker silent (AEC3 resting + noise suppression)",
            EchoMode::Aec,
            true,
            &silent,
        ),
    ] {
        let mut path = EchoPath::new(mode, noise_suppression, Some(48_000)).unwrap();
        let mut out = Vec::with_capacity(FRAME * 2);
        let mut frame = 0usize;
        let frames = far_16k.len() / FRAME;
        let mut step = |path: &mut EchoPath, out: &mut Vec<f32>| {
            let i = frame % frames;
            // Both streams stamped as the devices stamp them: heard and captured in step, the
            // mic's samples arriving 10 ms after capture.
            let at = frame as u64 * 10_000_000 + 1;
            let first = frame as u64 * 480;
            frame += 1;
            path.played(&speaker[i * 480..(i + 1) * 480], first, Some((first, at)));
            out.clear();
            let mic_frame = &mic[i * FRAME..(i + 1) * FRAME];
            path.process(mic_frame, Some(at), Some(at + 20_000_000), out);
        };
        // Past the start-up, and the second after which AEC3 rests.
        for _ in 0..200 {
            step(&mut path, &mut out);
        }
        group.bench_function(name, |b| {
            b.iter(|| {
                step(&mut path, &mut out);
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, capture_path, playback_path, voice_processing);
criterion_main!(benches);
