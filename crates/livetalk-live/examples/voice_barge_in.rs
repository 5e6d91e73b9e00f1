//! Audio both ways with a barge-in: microphone-like 16 kHz PCM16 goes up in 20 ms
//! `realtimeInput` chunks, the model's 24 kHz speech comes down, and speaking again while it
//! talks cuts it off (`interrupted`), after which no more of its audio arrives. Runs offline
//! against the mock Live server started in this process (no key, nothing but loopback).
//!
//! The mock hears by energy, as a voice activity detector does: 100 ms of audio louder than
//! -40 dBFS starts speech (and interrupts a reply being spoken), 600 ms quieter than that ends
//! it and the model answers. This example's "voice" is a buzzy 140 Hz tone; its "silence" is
//! faint noise, as a real microphone's is.
//!
//! ```text
//! cargo run -p livetalk-live --example voice_barge_in
//! ```

// An example talks to its reader on the terminal; there are no secrets to scrub.
#![allow(clippy::disallowed_macros)]

use std::process::ExitCode;
use std::time::Duration;

use livetalk_live::events::pcm16_to_le_bytes;
use livetalk_live::models::CURRENT_MODEL;
use livetalk_live::wire::{
    AudioTranscriptionConfig, ClientMessage, GenerationConfig, INPUT_SAMPLE_RATE, Modality,
    RealtimeInput, Setup,
};
use livetalk_live::{ApiVersion, Auth, ConnectOptions, Connection, Outbox, ServerEvent, connect};
use livetalk_mock::{MockOptions, MockServer};
use tokio::time::{Instant, MissedTickBehavior};

/// The longest wait for any one thing the server should do.
const WAIT: Duration = Duration::from_secs(10);
/// One microphone chunk: 20 ms at 16 kHz.
const CHUNK: Duration = Duration::from_millis(20);
const CHUNK_SAMPLES: usize = 320;
/// How long the user speaks before the model answers.
const FIRST_UTTERANCE: Duration = Duration::from_secs(1);
/// Model audio heard before the user speaks over it: two seconds (24 kHz, two bytes a sample).
const BARGE_IN_AFTER_BYTES: usize = 96_000;
/// How long the user goes on speaking once the model has stopped.
const SPEAK_ON: Duration = Duration::from_millis(500);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("voice_barge_in failed: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Where the conversation stands; each step says what the microphone sends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// The user asks something (voice) until `until`.
    Asking { until: Instant },
    /// Silence while the model's reply starts and goes on.
    Listening,
    /// The user speaks over the model (voice) since `since`.
    BargingIn { since: Instant },
    /// The model stopped; the user goes on speaking (voice) until `until`.
    SpeakingOn { until: Instant },
    /// Silence while the model answers what the user said over it.
    ListeningAgain,
}

impl Step {
    fn voiced(self) -> bool {
        matches!(
            self,
            Step::Asking { .. } | Step::BargingIn { .. } | Step::SpeakingOn { .. }
        )
    }
}

/// What the example measures.
#[derive(Debug, Default)]
struct Figures {
    /// Model audio bytes (24 kHz PCM16) of the reply that was interrupted.
    first_reply_bytes: usize,
    /// From the end of the question to the first byte of the reply.
    first_audio_after: Option<Duration>,
    /// From the first chunk of speech over the reply to `interrupted`.
    interrupted_after: Option<Duration>,
    /// Model audio bytes after `interrupted`, while the user still spoke.
    bytes_after_interrupt: usize,
    /// Model audio bytes of the answer to what the user said over the reply.
    second_reply_bytes: usize,
}

async fn run() -> Result<(), String> {
    let mock = MockServer::start(MockOptions::loopback())
        .await
        .map_err(|e| format!("the mock server did not start: {e}"))?;
    println!("mock Live server on {}", mock.base_url());

    let Connection {
        handle,
        mut inbound,
    } = connect(ConnectOptions {
        endpoint: mock.endpoint(ApiVersion::V1),
        auth: Auth::None,
        setup: Setup {
            model: CURRENT_MODEL.to_owned(),
            generation_config: Some(GenerationConfig {
                response_modalities: vec![Modality::Audio],
                ..GenerationConfig::default()
            }),
            input_audio_transcription: Some(AudioTranscriptionConfig::default()),
            output_audio_transcription: Some(AudioTranscriptionConfig::default()),
            ..Setup::default()
        },
        connect_timeout: WAIT,
    })
    .await
    .map_err(|e| format!("could not connect: {e}"))?;

    let mut mic = Microphone::default();
    let mut ticks = tokio::time::interval(CHUNK);
    // A late tick sends one chunk, not a burst: the microphone's clock does not catch up.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut step = Step::Asking {
        until: started + FIRST_UTTERANCE,
    };
    let mut step_deadline = started + FIRST_UTTERANCE + WAIT;
    let mut asked_at = None;
    let mut figures = Figures::default();
    let mut transcript = String::new();
    let mut heard = String::new();
    println!("you: (speaking for {} s)", FIRST_UTTERANCE.as_secs_f32());

    'conversation: loop {
        if Instant::now() > step_deadline {
            return Err(format!("stuck at {step:?} for over {} s", WAIT.as_secs()));
        }
        tokio::select! {
            _ = ticks.tick() => {
                let now = Instant::now();
                step = match step {
                    Step::Asking { until } if now >= until => {
                        asked_at = Some(now);
                        step_deadline = now + WAIT;
                        Step::Listening
                    }
                    Step::SpeakingOn { until } if now >= until => {
                        step_deadline = now + WAIT;
                        Step::ListeningAgain
                    }
                    other => other,
                };
                let chunk = mic.chunk(step.voiced());
                handle
                    .send(ClientMessage::RealtimeInput(RealtimeInput::mic_audio(chunk)))
                    .await
                    .map_err(|e| format!("could not send audio: {e}"))?;
            }
            frame = inbound.recv() => {
                let Some(frame) = frame else {
                    return Err("the connection's events ended early".to_owned());
                };
                for event in frame {
                match event {
                    ServerEvent::InputTranscription { text, finished } => {
                        heard.push_str(&text);
                        if finished {
                            println!("server heard: {}", heard.trim());
                            heard.clear();
                        }
                    }
                    ServerEvent::OutputTranscription { text, .. } => transcript.push_str(&text),
                    ServerEvent::ModelAudio { pcm, .. } => match step {
                        Step::Listening => {
                            if figures.first_reply_bytes == 0 {
                                figures.first_audio_after = asked_at.map(|at| at.elapsed());
                            }
                            figures.first_reply_bytes += pcm.len();
                            if figures.first_reply_bytes >= BARGE_IN_AFTER_BYTES {
                                println!("model: {}…", transcript.trim());
                                transcript.clear();
                                println!("you: (speaking over the model)");
                                let now = Instant::now();
                                step = Step::BargingIn { since: now };
                                step_deadline = now + WAIT;
                            }
                        }
                        Step::BargingIn { .. } => figures.first_reply_bytes += pcm.len(),
                        Step::SpeakingOn { .. } => figures.bytes_after_interrupt += pcm.len(),
                        Step::ListeningAgain => figures.second_reply_bytes += pcm.len(),
                        Step::Asking { .. } => {
                            return Err("the model spoke before it was asked anything".to_owned());
                        }
                    },
                    ServerEvent::Interrupted => {
                        let Step::BargingIn { since } = step else {
                            return Err(format!("interrupted at {step:?}, not by the barge-in"));
                        };
                        figures.interrupted_after = Some(since.elapsed());
                        println!("server: interrupted (the model stopped speaking)");
                        transcript.clear();
                        let now = Instant::now();
                        step = Step::SpeakingOn { until: now + SPEAK_ON };
                        step_deadline = now + SPEAK_ON + WAIT;
                    }
                    ServerEvent::TurnComplete { .. } if step == Step::ListeningAgain => {
                        println!("model: {}", transcript.trim());
                        break 'conversation;
                    }
                    ServerEvent::TurnComplete { .. } if step == Step::Listening => {
                        return Err("the reply ended before there was time to speak over it".to_owned());
                    }
                    ServerEvent::Closed(close) => {
                        return Err(format!("the connection ended: {}", close.message));
                    }
                    _ => {}
                }
                }
            }
        }
    }

    handle.close().await;
    loop {
        match tokio::time::timeout(WAIT, inbound.recv()).await {
            Ok(Some(frame)) => match frame.closed() {
                Some(close) if close.initiated_by_client => break,
                Some(close) => {
                    return Err(format!("the connection ended badly: {}", close.message));
                }
                None => {}
            },
            Ok(None) => return Err("the events ended without a close".to_owned()),
            Err(_) => return Err(format!("no close within {} s", WAIT.as_secs())),
        }
    }

    report(&figures, &mic)
}

/// Prints the figures; fails when the barge-in did not stop the model's audio.
fn report(figures: &Figures, mic: &Microphone) -> Result<(), String> {
    let seconds = |bytes: usize| bytes as f64 / 2.0 / 24_000.0;
    println!();
    println!(
        "microphone audio sent:           {} bytes ({:.2} s)",
        mic.bytes_sent,
        mic.bytes_sent as f64 / 2.0 / f64::from(INPUT_SAMPLE_RATE)
    );
    if let Some(after) = figures.first_audio_after {
        println!(
            "first reply audio, after speech: {} ms (the mock waits for 600 ms of silence)",
            after.as_millis()
        );
    }
    println!(
        "model audio before the barge-in: {} bytes ({:.2} s)",
        figures.first_reply_bytes,
        seconds(figures.first_reply_bytes)
    );
    if let Some(after) = figures.interrupted_after {
        println!(
            "barge-in to `interrupted`:       {} ms (the mock hears speech after five 20 ms chunks)",
            after.as_millis()
        );
    }
    println!(
        "model audio after `interrupted`: {} bytes",
        figures.bytes_after_interrupt
    );
    println!(
        "model audio of the next answer:  {} bytes ({:.2} s)",
        figures.second_reply_bytes,
        seconds(figures.second_reply_bytes)
    );
    if figures.bytes_after_interrupt > 0 {
        return Err("model audio went on arriving after `interrupted`".to_owned());
    }
    if figures.second_reply_bytes == 0 {
        return Err("the model did not answer what was said over it".to_owned());
    }
    Ok(())
}

/// A stand-in microphone: 20 ms chunks of 16 kHz PCM16, either a voice-like tone or the faint
/// noise of a quiet room.
#[derive(Default)]
struct Microphone {
    /// Samples produced so far (the tone's phase runs on across chunks).
    samples: u64,
    /// State of the noise generator.
    noise: u32,
    bytes_sent: usize,
}

impl Microphone {
    fn chunk(&mut self, voiced: bool) -> Vec<u8> {
        let rate = f64::from(INPUT_SAMPLE_RATE);
        let samples: Vec<i16> = (0..CHUNK_SAMPLES)
            .map(|_| {
                let t = self.samples as f64 / rate;
                self.samples += 1;
                // A linear congruential generator: enough for a noise floor near -65 dBFS.
                self.noise = self
                    .noise
                    .wrapping_mul(1_664_525)
                    .wrapping_add(1_013_904_223);
                let noise = f64::from((self.noise >> 16) as u16) / 65_536.0 - 0.5;
                let voice = if voiced {
                    // A 140 Hz fundamental and two harmonics: about -18 dBFS.
                    [(1.0, 0.16), (2.0, 0.08), (3.0, 0.04)]
                        .iter()
                        .map(|(harmonic, level)| {
                            level * (std::f64::consts::TAU * 140.0 * harmonic * t).sin()
                        })
                        .sum()
                } else {
                    0.0
                };
                ((voice + 0.002 * noise) * f64::from(i16::MAX)) as i16
            })
            .collect();
        let bytes = pcm16_to_le_bytes(&samples);
        self.bytes_sent += bytes.len();
        bytes
    }
}
