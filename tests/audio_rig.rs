//! Audio on the real-time rig: livetalk's cpal PulseAudio host against private PulseAudio
//! servers with null sinks. Speech goes in through the virtual mic and arrives at the mock;
//! model audio comes out of the virtual speaker at the right pitch and length; barge-in
//! silences it within 30 ms plus the rig's period.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use common::pane::Pane;
use common::rig::{self, PulseRig, RECORD_RATE, RigHost, RigSetup};
use common::{LineWatcher, MockProcess, livetalk, poll};
use livetalk::audio::resample::StreamResampler;

/// The rig's device period (10 ms buffers) plus the speaker monitor's recording latency.
const RIG_PERIOD_MS: f64 = 10.0;

#[test]
fn a_spoken_phrase_in_the_virtual_mic_reaches_the_mock_as_16khz_speech() {
    let rig = PulseRig::start();
    let scratch = rig::audio_scratch();
    let phrase = rig::spoken_phrase(scratch.path(), "Is the living room lamp on?");
    let player = rig::player_name(&phrase);
    let mut attempt = 0;
    let (spoken, heard, correlation) =
        rig::once_more_if_the_server_lost_audio(&rig, "the spoken phrase", &[&player], || {
            attempt += 1;
            phrase_to_the_mock(&rig, scratch.path(), &phrase, attempt)
        });
    eprintln!("phrase {spoken:.2} s, received {heard:.2} s, correlation {correlation:.3}");
}

/// Plays `phrase` into the virtual mic while livetalk streams it to the mock; the phrase's
/// length, what the mock heard of it and their correlation, or which bar they missed.
fn phrase_to_the_mock(
    rig: &PulseRig,
    scratch: &std::path::Path,
    phrase: &std::path::Path,
    attempt: usize,
) -> Result<(f64, f64, f64), String> {
    let saved = scratch.join(format!("received-{attempt}"));
    let mut mock = MockProcess::start(scratch, &["--save-input", saved.to_str().unwrap()]);

    let mut client = rig.headless(scratch, &["--endpoint", &mock.url]);
    let mut lines = LineWatcher::new(client.stdout.take().unwrap());

    // The mic is streaming once the mock has saved some of it.
    let input = saved.join("input-1.wav");
    let streaming = poll(Duration::from_secs(20), Duration::from_millis(20), || {
        (std::fs::metadata(&input).map(|m| m.len()).unwrap_or(0) >= 16_000).then_some(())
    });
    assert!(streaming.is_some(), "no mic audio reached the mock");
    let mut paplay = rig.play_into_mic(phrase);
    assert!(paplay.wait().unwrap().success(), "paplay failed");

    let reply = lines.wait_for(Duration::from_secs(30), |l| l.starts_with("Gemini:"));
    drop(client.stdin.take());
    let status = client.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status}; stderr: {stderr}");
    let _ = mock.child.kill();
    assert!(
        reply.contains("seconds of speech"),
        "the mock's reply to the spoken turn: {reply}"
    );

    // What the mock received: 16 kHz mono PCM16.
    let reader = hound::WavReader::open(&input).unwrap();
    assert_eq!(reader.spec().sample_rate, 16_000);
    assert_eq!(reader.spec().channels, 1);
    let received: Vec<f32> = reader
        .into_samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32_768.0)
        .collect();

    // The reference: the same phrase at 16 kHz.
    let clip = livetalk::audio::wav::read_mono(phrase).unwrap();
    let reference = StreamResampler::whole(&clip.samples, clip.rate, 16_000).unwrap();

    let (start, end) =
        rig::sound_span(&received, 16_000, 0.02).expect("speech in the received audio");
    let (ref_start, ref_end) = rig::sound_span(&reference, 16_000, 0.02).unwrap();
    let heard = end - start;
    let spoken = ref_end - ref_start;
    // livetalk's own account of its audio (mic frames sent and dropped, overflows, gaps).
    let account = stderr
        .lines()
        .find(|l| l.starts_with("livetalk: audio:"))
        .unwrap_or("livetalk: no audio summary")
        .to_owned();
    if (heard - spoken).abs() >= 0.1 {
        return Err(format!(
            "the mock got {heard:.2} s of speech for a {spoken:.2} s phrase ({account})"
        ));
    }
    // Correlated a quarter second at a time, each piece within 30 ms of where the whole
    // phrase is. On a busy machine the mic's samples now and then begin to arrive about 10 ms
    // later for good, though none was lost, and livetalk's gap filler, which cannot tell that
    // from lost samples, keeps the mic in step with as much silence (its debug log: "silence
    // takes their place gap_ms=8.06"). Correlated whole, a phrase with that silence in it
    // read 0.57-0.78 where each of its pieces was as good as in any other run.
    let onset = ((start - ref_start).max(0.0) * 16_000.0) as usize;
    let whole = livetalk::audio::pcm::best_correlation(&received, &reference, onset, 1600);
    let found = rig::find_in_pieces(
        &received,
        &reference,
        onset.saturating_sub(1600),
        onset + 1600,
        16_000 / 4,
        16_000 * 3 / 100,
    );
    let correlation = found.correlation;
    if correlation <= 0.8 {
        return Err(format!(
            "normalised cross-correlation with the phrase is only {correlation:.3} in quarter \
             seconds, {whole:.3} whole ({account})"
        ));
    }
    eprintln!("the phrase correlates {whole:.3} whole");
    Ok((spoken, heard, correlation))
}

/// The server's log tells a player that ran dry from one that did not: a pacat fed a quarter
/// second of a tone and then nothing runs dry in the server's log (waited for, with a
/// deadline), and one fed the whole tone at once and closed does not (its end is a drain);
/// the room's loopback re-timing itself is read in microseconds, and livetalk's own streams
/// are not counted. What lets a rig test repeat a run the server spoiled, and no other.
#[test]
fn the_server_log_shows_a_player_that_ran_dry() {
    let rig = PulseRig::start();
    let tone = |secs: f64| -> Vec<u8> {
        (0..(secs * 48_000.0) as usize)
            .flat_map(|i| {
                let v = 0.3 * (std::f64::consts::TAU * 440.0 * i as f64 / 48_000.0).sin();
                ((v * 32_767.0) as i16).to_le_bytes()
            })
            .collect()
    };
    let player = |name: &str| {
        rig.command("pacat")
            .args([
                "--playback",
                "--device=mic",
                "--channels=1",
                "--format=s16le",
                "--rate=48000",
            ])
            .arg(format!("--latency-msec={}", rig::PLAYER_BUFFER.as_millis()))
            .arg(format!("--stream-name={name}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pacat")
    };

    let mark = rig.log_mark();
    let mut starved = player("starved");
    let mut stdin = starved.stdin.take().unwrap();
    stdin.write_all(&tone(0.25)).unwrap();
    stdin.flush().unwrap();
    // It plays what it has, then runs dry: the server's log says so.
    let dry = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        Some(rig.server_loss(mark, &["starved"])).filter(|loss| !loss.underruns.is_empty())
    })
    .expect("the starved player's underrun never reached the server's log");
    stdin.write_all(&tone(0.25)).unwrap();
    drop(stdin);
    assert!(starved.wait().unwrap().success(), "pacat failed");
    assert_eq!(dry.underruns[0].0, "starved");
    assert!(
        dry.to_string().contains("starved's player ran dry"),
        "{dry}"
    );

    let mark = rig.log_mark();
    let mut fed = player("fed");
    let mut stdin = fed.stdin.take().unwrap();
    stdin.write_all(&tone(0.5)).unwrap();
    drop(stdin);
    assert!(fed.wait().unwrap().success(), "pacat failed");
    let loss = rig.server_loss(mark, &["fed"]);
    assert!(!loss.any(), "{loss}");

    let log = "I: [null-sink] module-loopback.c: Dropping 4854 usec of audio from queue\n\
               I: [null-sink] module-loopback.c: Adding 270 usec of silence to queue\n\
               D: [null-sink] protocol-native.c: Implicit underrun of 'livetalk'\n";
    let loopback = rig::ServerLoss::read(log, &["phrase.wav"]);
    assert_eq!(
        (
            loopback.loopback_dropped_us,
            loopback.loopback_padded_us,
            loopback.underruns.len()
        ),
        (4854, 270, 0),
        "livetalk's own stream is not the server's loss"
    );
}

/// A fake Live server that answers the first user turn with a 440 Hz tone streamed faster
/// than real time; with `interrupt_after`, it sends `interrupted` that long after the first
/// audio chunk (and never completes the tone).
async fn tone_server(tone_secs: f64, interrupt_after: Option<Duration>) -> String {
    tone_server_for(1, tone_secs, interrupt_after).await
}

/// [`tone_server`] answering `turns` user turns in turn, each with the tone.
async fn tone_server_for(
    turns: usize,
    tone_secs: f64,
    interrupt_after: Option<Duration>,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let _setup = ws.next().await.unwrap().unwrap();
        ws.send(Message::text("{\"setupComplete\":{}}"))
            .await
            .unwrap();
        for _ in 0..turns {
            // The user's turn (mic frames may come first).
            loop {
                let message = ws.next().await.unwrap().unwrap();
                if message.to_text().unwrap_or("").contains("clientContent") {
                    break;
                }
            }
            let samples = (tone_secs * 24_000.0) as usize;
            let pcm: Vec<u8> = (0..samples)
                .flat_map(|i| {
                    let v = 0.5 * (std::f64::consts::TAU * 440.0 * i as f64 / 24_000.0).sin();
                    ((v * 32_767.0) as i16).to_le_bytes()
                })
                .collect();
            let started = tokio::time::Instant::now();
            // 40 ms chunks, four times faster than real time, like the service's bursts.
            for chunk in pcm.chunks(1920) {
                let data = base64::engine::general_purpose::STANDARD.encode(chunk);
                let frame = format!(
                    "{{\"serverContent\":{{\"modelTurn\":{{\"parts\":[{{\"inlineData\":{{\"mimeType\":\"audio/pcm;rate=24000\",\"data\":\"{data}\"}}}}]}}}}}}"
                );
                ws.send(Message::text(frame)).await.unwrap();
                if let Some(after) = interrupt_after
                    && started.elapsed() >= after
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            match interrupt_after {
                Some(after) => {
                    tokio::time::sleep_until(started + after).await;
                    ws.send(Message::text("{\"serverContent\":{\"interrupted\":true}}"))
                        .await
                        .unwrap();
                    ws.send(Message::text("{\"serverContent\":{\"turnComplete\":true}}"))
                        .await
                        .unwrap();
                }
                None => {
                    ws.send(Message::text("{\"serverContent\":{\"turnComplete\":true}}"))
                        .await
                        .unwrap();
                }
            }
        }
        while let Some(Ok(message)) = ws.next().await {
            if message.is_close() {
                break;
            }
        }
    });
    url
}

/// Runs a headless client against `url` on the rig: one typed turn, JSON output; returns
/// the JSON events and what the speaker played.
fn talk_to_tone_server(
    rig: &PulseRig,
    url: &str,
    wait_for_interrupt: bool,
) -> (Vec<serde_json::Value>, Vec<f32>, String) {
    let scratch = rig::audio_scratch();
    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    let mark = rig.log_mark();
    let mut client = rig.headless(scratch.path(), &["--endpoint", url, "--json"]);
    let mut stdin = client.stdin.take().unwrap();
    writeln!(stdin, "Play me a tone.").unwrap();
    let mut lines = LineWatcher::new(client.stdout.take().unwrap());
    if wait_for_interrupt {
        lines.wait_for(Duration::from_secs(30), |l| l.contains("\"interrupted\""));
    }
    drop(stdin);
    let status = client.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status}; stderr: {stderr}");
    let seen = lines.rest();
    // Let the monitor catch up with the end of playback, and hear a second of what follows.
    recording.wait_for_more(1.2);
    let played = recording.stop();
    let events = seen
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    (events, played, ran_dry(rig, mark))
}

/// What the sound server's log says of livetalk's playback since `mark`: how many times the
/// server found its stream empty (livetalk late with what it asked for), so that a tone cut
/// or stretched says where it went. livetalk's streams carry no name (`(null)` in the log).
fn ran_dry(rig: &PulseRig, mark: rig::LogMark) -> String {
    let times: usize = rig
        .server_loss(mark, &["(null)"])
        .underruns
        .iter()
        .map(|(_, count)| count)
        .sum();
    format!("the sound server ran dry of livetalk's playback {times} time(s)")
}

fn audio_summary(events: &[serde_json::Value]) -> &serde_json::Value {
    events
        .iter()
        .find(|e| e["type"] == "audio")
        .unwrap_or_else(|| panic!("no audio summary at the end in {events:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn model_audio_comes_out_of_the_virtual_speaker_at_the_right_pitch_and_length() {
    let rig = PulseRig::start();
    let url = tone_server(1.5, None).await;
    let (events, played, server) = tokio::task::spawn_blocking(move || {
        let result = talk_to_tone_server(&rig, &url, false);
        drop(rig);
        result
    })
    .await
    .unwrap();
    let (start, end) = rig::sound_span(&played, RECORD_RATE, 0.05)
        .unwrap_or_else(|| panic!("the tone was not heard; the client printed {events:#?}"));
    let summary = audio_summary(&events);
    let heard = end - start;
    assert!(
        (heard - 1.5).abs() < 0.05,
        "played {heard:.3} s of a 1.5 s tone: the tail must not be cut, nothing added ({server}; {summary})"
    );
    let middle = &played[((start + 0.2) * 24_000.0) as usize..((end - 0.2) * 24_000.0) as usize];
    let pitch = rig::tone_frequency(middle, RECORD_RATE);
    assert!(
        (pitch - 440.0).abs() < 3.0,
        "pitch {pitch:.1} Hz ({server}; {summary})"
    );
    assert_eq!(summary["underruns"], 0, "{summary}");
    let first_sound = summary["socket_to_speaker"]["last_ms"]
        .as_f64()
        .expect("measured");
    eprintln!(
        "tone {heard:.3} s at {pitch:.1} Hz; socket → speaker {first_sound:.1} ms; {summary}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn barge_in_silences_the_speaker_within_30ms_of_interrupted() {
    let rig = PulseRig::start();
    let interrupt_after = Duration::from_millis(1000);
    let url = tone_server(4.0, Some(interrupt_after)).await;
    let (events, played, _) = tokio::task::spawn_blocking(move || {
        let result = talk_to_tone_server(&rig, &url, true);
        drop(rig);
        result
    })
    .await
    .unwrap();
    let summary = audio_summary(&events);
    let to_silence = summary["interrupt_to_silence"]["last_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("interrupt → silence not measured: {summary}"));
    assert!(
        to_silence <= 30.0 + RIG_PERIOD_MS,
        "silent {to_silence:.1} ms after `interrupted`"
    );
    // What the speaker played: the tone until the interrupt, then nothing of the other 3 s.
    let (start, end) = rig::sound_span(&played, RECORD_RATE, 0.05).expect("the tone was heard");
    let heard = end - start;
    let limit = interrupt_after.as_secs_f64() + (30.0 + RIG_PERIOD_MS) / 1000.0;
    assert!(
        heard <= limit && heard > 0.5,
        "the speaker played {heard:.3} s; the interrupt came {:.3} s after the first audio",
        interrupt_after.as_secs_f64()
    );
    // From 20 ms after the tone stopped (the end of its last loud window), a second of silence.
    let after = &played[((end + 0.02) * 24_000.0) as usize..];
    assert!(
        after.len() >= 24_000,
        "recorded only {} samples after the tone",
        after.len()
    );
    assert!(
        rig::sound_span(after, RECORD_RATE, 0.01).is_none(),
        "sound after the barge-in: {:?}",
        rig::sound_span(after, RECORD_RATE, 0.01)
    );
    let model = events.iter().find(|e| e["type"] == "model").unwrap();
    assert_eq!(model["status"], "interrupted");
    eprintln!("heard {heard:.3} s; interrupt → silence {to_silence:.1} ms; {summary}");
}

/// Whether the rig's speaker has a stream from livetalk that is paused (corked), as the
/// server says; `None` while it has none.
fn speaker_stream_corked(rig: &PulseRig) -> Option<bool> {
    let out = rig
        .command("pactl")
        .args(["list", "sink-inputs"])
        .output()
        .expect("pactl");
    let text = String::from_utf8_lossy(&out.stdout);
    let corked = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Corked:"))?;
    Some(corked.trim() == "yes")
}

/// The most of a core cpal's ALSA playback thread may take while its stream is paused: it
/// waits for `play()` and does nothing else. Polling the paused PCM, it spun through the
/// errors ALSA's PulseAudio plugin gives back at once (thousands a second).
const PAUSED_SPEAKER_THREAD_MAX_SHARE: f64 = 0.01;

/// With nothing to play, the speaker stream is paused (it cost a silent session most of its
/// CPU, and the sound server as much again), and the next reply starts it again: heard whole,
/// at its pitch, soon after it arrived. While it is paused no speaker error is reported, and on
/// ALSA cpal's playback thread sleeps (it polled the paused device through ALSA's PulseAudio
/// plugin and spun through its errors until `patches/cpal-alsa-pause.patch`).
fn the_speaker_pauses_between_replies_and_the_next_plays_whole(host: RigHost) {
    let rig = PulseRig::launch(RigSetup {
        host,
        ..RigSetup::default()
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime.block_on(tone_server_for(2, 1.5, None));
    let scratch = rig::audio_scratch();
    // Recorded from the start, as in the other tests: an idle null sink nobody records renders
    // in long blocks, and its first sound then takes seconds to be asked for.
    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    // Debug logging: every stream error is logged (a passing one at debug), naming its
    // direction.
    let mut client = rig
        .livetalk(scratch.path())
        .env("LIVETALK_LOG", "debug")
        .args(["--headless", "--endpoint", &url, "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn livetalk");
    let mut stdin = client.stdin.take().unwrap();
    let mut lines = LineWatcher::new(client.stdout.take().unwrap());
    writeln!(stdin, "Play me a tone.").unwrap();
    lines.wait_for(Duration::from_secs(30), |l| {
        l.contains("\"status\":\"complete\"")
    });
    // The server's own word, polled: nothing announces it.
    let paused = poll(Duration::from_secs(10), Duration::from_millis(50), || {
        speaker_stream_corked(&rig).filter(|&corked| corked)
    });
    assert!(
        paused.is_some(),
        "the speaker stream still runs with nothing to play"
    );
    let log_at_pause = common::log_bytes(scratch.path());
    if host == RigHost::Alsa {
        let speaker_thread = || {
            rig::thread_times(client.id())
                .into_iter()
                .find(|t| t.name == "cpal_alsa_out")
                .expect("cpal's ALSA playback thread")
        };
        let before = speaker_thread();
        let started = std::time::Instant::now();
        // 2 s of the rig's clock (the speaker's recording), not a sleep.
        recording.wait_for_more(2.0);
        let share = (speaker_thread().cpu - before.cpu) / started.elapsed().as_secs_f64();
        assert_eq!(
            speaker_stream_corked(&rig),
            Some(true),
            "the speaker stream ran again with nothing to play"
        );
        assert!(
            share <= PAUSED_SPEAKER_THREAD_MAX_SHARE,
            "cpal_alsa_out took {:.1} % of a core while its stream was paused",
            share * 100.0
        );
        eprintln!(
            "{}: cpal_alsa_out {:.1} % of a core over 2 s paused",
            rig.label(),
            share * 100.0
        );
    }
    // Errors while the stream runs are another matter (ALSA's PulseAudio plugin has bursts of
    // them with a running stream, paused or not before): only the pause's are looked at.
    let log = std::fs::read(scratch.path().join("data/livetalk/livetalk.log")).unwrap();
    let paused_log = String::from_utf8_lossy(log.get(log_at_pause as usize..).unwrap_or(&[]));
    let errors: Vec<&str> = paused_log
        .lines()
        .filter(|l| l.contains("direction=Output"))
        .collect();
    assert!(
        errors.is_empty(),
        "the paused speaker reported {} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let second_from = recording.len();
    writeln!(stdin, "Another one.").unwrap();
    lines.wait_for(Duration::from_secs(30), |l| {
        l.contains("\"status\":\"complete\"")
    });
    drop(stdin);
    let status = common::wait_exit(client, Duration::from_secs(20));
    assert!(status.success(), "exit {status}");
    recording.wait_for_more(1.2);
    let played = recording.stop().split_off(second_from);
    let events: Vec<serde_json::Value> = lines
        .rest()
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary = audio_summary(&events);
    let (start, end) = rig::sound_span(&played, RECORD_RATE, 0.05)
        .unwrap_or_else(|| panic!("the second tone was not heard: {summary}"));
    let heard = end - start;
    assert!(
        (heard - 1.5).abs() < 0.05,
        "played {heard:.3} s of a 1.5 s tone after the pause: {summary}"
    );
    let middle = &played[((start + 0.2) * 24_000.0) as usize..((end - 0.2) * 24_000.0) as usize];
    let pitch = rig::tone_frequency(middle, RECORD_RATE);
    assert!((pitch - 440.0).abs() < 3.0, "pitch {pitch:.1} Hz");
    assert_eq!(summary["underruns"], 0, "{summary}");
    // Socket → speaker includes the 40 ms start-up buffer arriving at four times real time
    // (10 ms). The second reply's (the last measured) started the paused stream; the first
    // opened a fresh one, whose start through ALSA's plugin varies by tens of ms.
    let after_pause = summary["socket_to_speaker"]["last_ms"]
        .as_f64()
        .expect("measured");
    assert!(
        after_pause <= 60.0,
        "socket → speaker {after_pause:.1} ms after the pause: {summary}"
    );
    eprintln!(
        "{}: second tone {heard:.3} s at {pitch:.1} Hz after a pause; {summary}",
        rig.label()
    );
}

#[test]
fn the_pulseaudio_speaker_pauses_between_replies_and_the_next_plays_whole() {
    the_speaker_pauses_between_replies_and_the_next_plays_whole(RigHost::PulseAudio);
}

#[test]
fn the_alsa_speaker_pauses_between_replies_and_the_next_plays_whole() {
    the_speaker_pauses_between_replies_and_the_next_plays_whole(RigHost::Alsa);
}

/// No sound system at all (a PulseAudio address nobody listens on; ALSA with an empty
/// configuration): livetalk says so once and the typed conversation works.
#[test]
fn with_no_audio_device_livetalk_says_so_once_and_text_chat_works() {
    let scratch = rig::audio_scratch();
    let empty_alsa = scratch.path().join("empty-alsa.conf");
    std::fs::write(&empty_alsa, "").unwrap();
    let nowhere = format!("unix:{}", scratch.path().join("no-such-socket").display());
    for (host, envs) in [
        ("pulseaudio", vec![("PULSE_SERVER", nowhere.as_str())]),
        (
            "alsa",
            vec![("ALSA_CONFIG_PATH", empty_alsa.to_str().unwrap())],
        ),
    ] {
        let run = common::run_livetalk(
            scratch.path(),
            &["--headless", "--offline", "--audio-host", host],
            &envs,
            &common::SMART_HOME_LINES,
        );
        assert_eq!(run.code, Some(0), "{host}: {}", run.stderr);
        common::assert_smart_home_dialogue(&run.stdout);
        let said = run.stderr.matches("No audio device").count();
        assert_eq!(said, 1, "{host}: said {said} times:\n{}", run.stderr);
        assert!(
            !run.stderr.contains("ALSA lib"),
            "alsa-lib's own messages must not leak: {}",
            run.stderr
        );
    }
}

/// `livetalk replay` in a terminal plays the recorded model audio on the speaker at the
/// recorded pace; `--mute` plays nothing.
#[test]
fn tui_replay_plays_the_recorded_model_audio_and_mute_silences_it() {
    let rig = PulseRig::start();
    let scratch = rig::audio_scratch();
    let dir = scratch.path().join("rec");
    let original = common::run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--offline",
            "--no-audio",
            "--record",
            dir.to_str().unwrap(),
        ],
        &[],
        &common::SMART_HOME_LINES[..1],
    );
    assert_eq!(original.code, Some(0), "{}", original.stderr);
    let model = hound::WavReader::open(dir.join("model.wav")).unwrap();
    let recorded = f64::from(model.duration()) / 24_000.0;
    assert!(
        recorded > 1.0,
        "the recording holds {recorded:.2} s of model audio"
    );

    for mute in [false, true] {
        let dir_arg = dir.to_str().unwrap();
        let mut args = vec![
            "replay",
            dir_arg,
            "--audio-host",
            "pulseaudio",
            "--output-device",
            "spk",
        ];
        if mute {
            args.push("--mute");
        }
        let recording = rig.record_speaker();
        recording.wait_for_more(0.2);
        let pane = Pane::start_with(scratch.path(), 220, 40, &args, |tmux| rig.apply(tmux));
        pane.wait_for("the replay to finish", Duration::from_secs(60), |s| {
            s.contains("(finished)")
        });
        // The last reply's audio plays out after the last step.
        recording.wait_for_more(recorded.min(12.0) + 1.0);
        pane.keys("q");
        let played = recording.stop();
        let heard = rig::sound_span(&played, RECORD_RATE, 0.02).map(|(s, e)| e - s);
        if mute {
            assert_eq!(heard, None, "--mute played sound");
        } else {
            let heard = heard.expect("the replay played no sound");
            assert!(
                heard > recorded * 0.8,
                "heard {heard:.2} s of {recorded:.2} s of recorded model audio"
            );
        }
    }
}

/// The Done-means run: `livetalk --headless --offline` with a spoken WAV as the mic; the
/// embedded mock's spoken reply comes back out of the virtual speaker, whole.
#[test]
fn offline_headless_with_a_spoken_wav_answers_out_of_the_virtual_speaker() {
    let rig = PulseRig::start();
    let scratch = rig::audio_scratch();
    let phrase = rig::spoken_phrase(scratch.path(), "Is the living room lamp on?");
    let output = scratch.path().join("answer.wav");
    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    let mut command = livetalk(scratch.path());
    rig.apply(&mut command);
    let run = command
        .args(["--headless", "--offline", "--audio-host", "pulseaudio"])
        .args(["--output-device", "spk", "--input-wav"])
        .arg(&phrase)
        .arg("--output-wav")
        .arg(&output)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Gemini: I heard about 1.3 seconds of speech"),
        "{stdout}"
    );
    recording.wait_for_more(0.5);
    let played = recording.stop();
    // The reply as written to --output-wav is what the speaker must have played.
    let reply: Vec<f32> = hound::WavReader::open(&output)
        .unwrap()
        .into_samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32_768.0)
        .collect();
    let (reply_start, reply_end) =
        rig::sound_span(&reply, 24_000, 0.02).expect("the reply WAV is silent");
    let reply_secs = reply_end - reply_start;
    let (start, end) = rig::sound_span(&played, RECORD_RATE, 0.02).expect("no reply was heard");
    assert!(reply_secs > 2.0, "a {reply_secs:.2} s reply");
    assert!(
        ((end - start) - reply_secs).abs() < 0.05,
        "heard {:.2} s of a {reply_secs:.2} s reply",
        end - start
    );
    assert!(stderr.contains("0 underruns"), "{stderr}");
}

/// The Done-means run of the client's WebRTC transport: the terminal app in tmux on the rig,
/// `livetalk --bridge … --bridge-transport webrtc` through `livetalk serve --offline`; a
/// spoken phrase played into the virtual mic goes to the bridge on the track, and the mock's
/// answer about its length shows in the transcript and is heard out of the virtual speaker.
#[test]
fn the_terminal_app_talks_to_the_bridge_over_webrtc_on_the_rig() {
    let rig = PulseRig::start();
    let scratch = rig::audio_scratch();
    let phrase = rig::spoken_phrase(scratch.path(), "Is the living room lamp on?");
    let mut serve = livetalk(scratch.path())
        .args([
            "serve",
            "--offline",
            "--listen",
            "127.0.0.1:0",
            "--speed",
            "20",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = LineWatcher::new(serve.stdout.take().unwrap()).wait_for_url(Duration::from_secs(20));
    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    let (source, sink) = rig::RIG_DEVICES;
    let args = [
        "--bridge",
        url.as_str(),
        "--bridge-transport",
        "webrtc",
        "--audio-host",
        "pulseaudio",
        "--input-device",
        source,
        "--output-device",
        sink,
    ];
    let pane = Pane::start_with(scratch.path(), 160, 40, &args, |tmux| rig.apply(tmux));
    // The voice is on the track once the client's log says so.
    let log = scratch.path().join("data/livetalk/livetalk.log");
    let connected = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|l| l.contains("WebRTC connected"))
            .map(|_| ())
    });
    assert!(
        connected.is_some(),
        "no WebRTC connection:\n{}",
        pane.screen()
    );
    let mut paplay = rig.play_into_mic(&phrase);
    assert!(paplay.wait().unwrap().success(), "paplay failed");
    // The transcript shows the mock's answer about the phrase's length (1.3 s).
    let screen = pane.wait_for("the mock's answer", Duration::from_secs(30), |s| {
        s.contains("Gemini: I heard about 1.")
    });
    let heard = recording.wait_for_sound(0.02, Duration::from_secs(10));
    assert!(heard.is_some(), "no reply was heard:\n{screen}");
    // The turn ends once the track has delivered the whole reply; then it plays out.
    let reply = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        std::fs::read_to_string(&log).ok().and_then(|l| {
            l.lines()
                .find(|l| l.contains("WebRTC reply heard on the track"))
                .map(str::to_owned)
        })
    })
    .expect("the reply's turn ended");
    recording.wait_for_more(0.5);
    pane.keys("C-c");
    let played = recording.stop();
    let _ = serve.kill();
    let _ = serve.wait();
    let (start, end) = rig::sound_span(&played, RECORD_RATE, 0.02).expect("no reply was heard");
    assert!(
        !pane.screen().contains("over the WebSocket"),
        "{}",
        pane.screen()
    );
    let track_ms: f64 = reply
        .split("track_ms=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .expect("track_ms in the log");
    let heard = end - start;
    eprintln!(
        "heard {heard:.2} s of a {:.2} s reply from the track",
        track_ms / 1000.0
    );
    // Heard whole, and once (a busy machine's underruns may stretch it a little).
    let reply = track_ms / 1000.0;
    assert!(
        heard > reply * 0.8 && heard < reply * 1.5,
        "heard {heard:.2} s of a {reply:.2} s reply"
    );
}

/// A server that lets clients in without a cookie, and no cookie anywhere a client looks
/// (containers, WSLg): livetalk's own PulseAudio client gets in wherever paplay does, lists
/// the server's devices and plays its reply out of the virtual speaker.
#[test]
fn without_a_pulseaudio_cookie_livetalk_works_wherever_paplay_does() {
    let rig = PulseRig::start_without_cookie();
    let scratch = rig::audio_scratch();
    let phrase = rig::spoken_phrase(scratch.path(), "Is the living room lamp on?");
    let mut paplay = rig.play_into_mic(&phrase);
    assert!(paplay.wait().unwrap().success(), "paplay failed");

    let mut command = livetalk(scratch.path());
    rig.apply(&mut command);
    let listed = command
        .args(["devices", "--audio-host", "pulseaudio"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&listed.stdout);
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(listed.status.success(), "{stdout}\n{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.get(2..)?.split_whitespace().next())
        .collect();
    for device in ["spk", "mic.monitor"] {
        assert!(names.contains(&device), "{device} is not listed:\n{stdout}");
    }

    let recording = rig.record_speaker();
    recording.wait_for_more(0.2);
    let mut command = livetalk(scratch.path());
    rig.apply(&mut command);
    let run = command
        .args(["--headless", "--offline", "--audio-host", "pulseaudio"])
        .args(["--output-device", "spk", "--input-wav"])
        .arg(&phrase)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("No audio device"), "{stderr}");
    recording.wait_for_more(0.5);
    let played = recording.stop();
    let (start, end) = rig::sound_span(&played, RECORD_RATE, 0.02).expect("no reply was heard");
    assert!(end - start > 1.0, "heard {:.2} s of the reply", end - start);
}

/// The names marked `*` under `title` ("Input" or "Output") in a `livetalk devices` table.
fn marked_defaults<'a>(table: &'a str, title: &str) -> Vec<&'a str> {
    table
        .lines()
        .skip_while(|l| *l != format!("{title}:"))
        .skip(1)
        .take_while(|l| l.starts_with(' ') || l.starts_with('*'))
        .filter_map(|l| l.strip_prefix("* ")?.split_whitespace().next())
        .collect()
}

/// `livetalk devices` on either host prints its table and nothing on stderr (alsa-lib, and
/// libjack through ALSA's jack plugin, talk there while devices are probed), and marks
/// exactly one default each way: ALSA's `default`, the PulseAudio server's own default sink
/// and source. Where the default cannot be opened it says so instead of marking nothing.
#[test]
fn devices_prints_no_library_noise_and_marks_one_default_each_way() {
    let rig = PulseRig::start();
    let scratch = rig::audio_scratch();
    // Not the server's first sink and its monitor, which it picks when told nothing.
    for (what, name) in [
        ("set-default-sink", "mic"),
        ("set-default-source", "mic.monitor"),
    ] {
        let status = rig.command("pactl").args([what, name]).status().unwrap();
        assert!(status.success(), "pactl {what} {name}");
    }
    let empty_alsa = scratch.path().join("empty-alsa.conf");
    std::fs::write(&empty_alsa, "").unwrap();
    for (host, no_alsa, defaults) in [
        ("alsa", false, Some(("default", "default"))),
        ("pulseaudio", false, Some(("mic.monitor", "mic"))),
        ("alsa", true, None),
    ] {
        let mut command = livetalk(scratch.path());
        rig.apply(&mut command);
        if no_alsa {
            command.env("ALSA_CONFIG_PATH", &empty_alsa);
        }
        let run = command
            .args(["devices", "--audio-host", host])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{host}: {stdout}\n{stderr}");
        assert_eq!(stderr, "", "{host}: library noise on stderr");
        assert!(stdout.contains("(* = default)"), "{stdout}");
        let marked = (
            marked_defaults(&stdout, "Input"),
            marked_defaults(&stdout, "Output"),
        );
        match defaults {
            Some((input, output)) => {
                assert_eq!(marked, (vec![input], vec![output]), "{host}:\n{stdout}");
            }
            None => {
                assert_eq!(marked, (vec![], vec![]), "{stdout}");
                for noun in ["microphone", "speaker"] {
                    assert!(
                        stdout.contains(&format!(
                            "(no default {noun}: \"default\" cannot be opened now)"
                        )),
                        "{stdout}"
                    );
                }
            }
        }
    }
}

/// The share of a core each of the audio host's threads may take while another client plays
/// into the mic's source. Each, not all together: a spin is one thread's, and at rest cpal's two
/// ALSA threads already take about 3 % between them in this build.
const AUDIO_THREAD_MAX_SHARE: f64 = 0.05;

/// The audio host's threads of livetalk on `host`, streaming the rig's mic to a mock while
/// another client plays into the mic's source at 20 ms latency: the share of a core each took
/// over 5 s of mic audio (those `is_audio` picks among all the threads), and a line of what
/// every thread took.
fn audio_threads_beside_a_20ms_player(
    host: RigHost,
    is_audio: impl Fn(&rig::ThreadTime, &[rig::ThreadTime]) -> bool,
) -> (Vec<(String, f64)>, String) {
    let rig = PulseRig::launch(RigSetup {
        host,
        ..RigSetup::default()
    });
    let scratch = rig::audio_scratch();
    let saved = scratch.path().join("received");
    let mock = MockProcess::start(scratch.path(), &["--save-input", saved.to_str().unwrap()]);
    let player = rig.loop_into_mic(Duration::from_millis(20));
    let mut client = rig.headless(scratch.path(), &["--endpoint", &mock.url, "--echo", "off"]);
    let pid = client.id();
    // Drained as it comes, so that the client never waits on a full pipe.
    let _stdout = common::read_all(client.stdout.take().unwrap());
    let stderr = common::read_all(client.stderr.take().unwrap());
    let input = saved.join("input-1.wav");
    let received = || std::fs::metadata(&input).map(|m| m.len()).unwrap_or(0);
    // 16 kHz PCM16: 32,000 bytes a second. Half a second first, so both streams have started.
    let streaming = poll(Duration::from_secs(20), Duration::from_millis(20), || {
        (received() >= 16_000).then_some(())
    });
    assert!(streaming.is_some(), "no mic audio reached the mock");
    let before = rig::thread_times(pid);
    let (started, from) = (std::time::Instant::now(), received());
    // The window is 5 s of mic audio as the mock received it: the rig's clock, not a sleep.
    let window = poll(Duration::from_secs(30), Duration::from_millis(20), || {
        (received() >= from + 5 * 32_000).then_some(())
    });
    let after = rig::thread_times(pid);
    let elapsed = started.elapsed().as_secs_f64();
    drop(client.stdin.take());
    let status = common::wait_exit(client, Duration::from_secs(20));
    drop(player);
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    assert!(status.success(), "exit {status}; stderr: {stderr}");
    assert!(
        window.is_some(),
        "the mic stalled: 5 s of it did not arrive in 30 s"
    );
    let mut audio = Vec::new();
    let mut threads = Vec::new();
    for thread in &after {
        let was = before
            .iter()
            .find(|b| b.tid == thread.tid)
            .map_or(0.0, |b| b.cpu);
        let share = (thread.cpu - was) / elapsed;
        let picked = is_audio(thread, &after);
        if picked {
            audio.push((format!("{} {}", thread.name, thread.tid), share));
        }
        if share > 0.0 || picked {
            threads.push(format!(
                "{}{} {}: {:.1} %",
                thread.name,
                if picked { "*" } else { "" },
                thread.tid,
                share * 100.0
            ));
        }
    }
    assert!(!audio.is_empty(), "no audio thread among {threads:?}");
    let line = format!(
        "{} over {elapsed:.2} s, audio threads *: {}; {}",
        rig.label(),
        threads.join(", "),
        stderr.trim()
    );
    (audio, line)
}

/// Fails naming the busiest audio thread if it took more than its share.
fn assert_no_audio_thread_spins(audio: &[(String, f64)], line: &str) {
    let total: f64 = audio.iter().map(|(_, share)| share).sum();
    eprintln!(
        "audio threads {:.1} % of a core in all; {line}",
        total * 100.0
    );
    let (name, busiest) = audio
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("an audio thread");
    assert!(
        *busiest <= AUDIO_THREAD_MAX_SHARE,
        "{name} took {:.1} % of a core; {line}",
        busiest * 100.0
    );
}

/// Another client playing into the microphone's source at 20 ms latency costs none of cpal's
/// ALSA threads more than 5 % of a core. Through ALSA's PulseAudio plugin the mic then arrives
/// in pieces smaller than a period and the plugin keeps its descriptor readable: cpal 0.18's
/// capture thread polled again at once (22–23 % of a core here) until
/// `patches/cpal-alsa-capture-spin.patch`.
#[test]
fn a_20ms_player_on_the_mic_source_does_not_make_the_alsa_audio_threads_spin() {
    let (audio, line) = audio_threads_beside_a_20ms_player(RigHost::Alsa, |thread, _| {
        thread.name.starts_with("cpal_alsa")
    });
    assert_no_audio_thread_spins(&audio, &line);
}

/// The same on cpal's PulseAudio host. Its threads (the PulseAudio client's reactor, which
/// also runs the device callbacks, and cpal's timing threads) have no names of their own: they
/// take the name of the thread that started them, livetalk's audio worker, which is the first
/// `livetalk-audio` thread and is not counted (its work is livetalk's, not the host's). The
/// server sends the mic in 2 ms pieces here (about 500 callbacks a second); cpal asked for the
/// stream's timing after each, which took 6–10 % of a core, until
/// `patches/cpal-pulseaudio-timing.patch` (timing interpolated between fewer queries).
#[test]
fn a_20ms_player_on_the_mic_source_does_not_make_the_pulseaudio_audio_threads_spin() {
    let (audio, line) = audio_threads_beside_a_20ms_player(RigHost::PulseAudio, |thread, all| {
        let worker = all
            .iter()
            .filter(|t| t.name == "livetalk-audio")
            .map(|t| t.tid)
            .min();
        thread.name == "livetalk-audio" && Some(thread.tid) != worker
    });
    assert_no_audio_thread_spins(&audio, &line);
}
