//! Soak: continuous mic audio up and model audio down through the mock, with a goAway every
//! few turns. RSS must stay flat, no reconnect may lose a turn, no frame may be left unsent.
//!
//! Bounded for CI (60 s); `LIVETALK_SOAK_SECS=1800 cargo nextest run --test soak` soaks for
//! half an hour. The figures are printed (`--no-capture` shows them on success).

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::harness::Harness;
use common::poll_async;
use livetalk::app::{Entry, ModelTurnStatus};
use livetalk::driver::Source as _;
use livetalk_mock::{Fault, FaultAction, Moment};
use tokio::time::Instant;

/// 20 ms of 16 kHz mono PCM16.
const FRAME_SAMPLES: usize = 320;
const FRAME: Duration = Duration::from_millis(20);
/// How long each utterance is; the mock's VAD ends it after 600 ms of silence.
const UTTERANCE: Duration = Duration::from_millis(1000);
/// Silence after a reply before the next utterance.
const PAUSE: Duration = Duration::from_millis(300);
/// A turn that takes longer than this was lost.
const TURN_LIMIT: Duration = Duration::from_secs(20);

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A frame of speech-loud noise (about -12 dBFS) or silence, as PCM16 little-endian.
fn frame(loud: bool, seed: &mut u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(FRAME_SAMPLES * 2);
    for _ in 0..FRAME_SAMPLES {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 17;
        *seed ^= *seed << 5;
        let sample = if loud {
            ((*seed >> 16) as i16 / 4).wrapping_add(0)
        } else {
            0
        };
        bytes.extend_from_slice(&sample.to_le_bytes());
    }
    bytes
}

fn complete_replies(h: &Harness) -> (usize, usize) {
    let mut complete = 0;
    let mut interrupted = 0;
    for entry in h.app.transcript() {
        if let Entry::Model { status, .. } = entry {
            match status {
                ModelTurnStatus::Complete => complete += 1,
                ModelTurnStatus::Interrupted => interrupted += 1,
                ModelTurnStatus::Streaming => {}
            }
        }
    }
    (complete, interrupted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_with_continuous_audio_and_periodic_go_aways() {
    let seconds: u64 = std::env::var("LIVETALK_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let duration = Duration::from_secs(seconds);
    let mut h = Harness::start(vec![Fault::repeating(
        Moment::TurnComplete,
        2,
        3,
        FaultAction::GoAway {
            time_left: Duration::from_secs(5),
            code: 1008,
            reason: "The operation was aborted.".into(),
        },
    )])
    .await;

    let mut seed = 0x1234_5678u32;
    let mut frames_sent: u64 = 0;
    let mut utterances = 0usize;
    let mut rss_start = None;
    let started = Instant::now();
    let mut next_frame = Instant::now();
    // Speech until `speech_until`, then silence until the reply is in and a pause has passed.
    let mut speech_until = Instant::now() + UTTERANCE;
    let mut awaiting_reply_since: Option<Instant> = None;
    let mut pause_until: Option<Instant> = None;

    while started.elapsed() < duration || awaiting_reply_since.is_some() {
        tokio::select! {
            _ = tokio::time::sleep_until(next_frame) => {
                let now = Instant::now();
                let loud = now < speech_until;
                h.engine.send_audio(frame(loud, &mut seed)).await;
                frames_sent += 1;
                next_frame += FRAME;
                if !loud && awaiting_reply_since.is_none() && pause_until.is_none() {
                    // The utterance just ended: its reply is now owed.
                    utterances += 1;
                    awaiting_reply_since = Some(now);
                }
                if let Some(since) = awaiting_reply_since {
                    let (complete, _) = complete_replies(&h);
                    if complete >= utterances {
                        awaiting_reply_since = None;
                        pause_until = Some(now + PAUSE);
                        if utterances == 2 {
                            // Warmed up: buffers, the voice, the first reconnect paths.
                            rss_start = Some(rss_bytes());
                        }
                    } else {
                        assert!(
                            now - since < TURN_LIMIT,
                            "utterance {utterances} got no reply in {TURN_LIMIT:?}; notices: {:#?}",
                            h.app.notices()
                        );
                    }
                }
                if let Some(until) = pause_until
                    && now >= until
                    && started.elapsed() < duration
                {
                    pause_until = None;
                    speech_until = now + UTTERANCE;
                }
            }
            msg = h.engine.next() => {
                let msg = msg.expect("the session stays open");
                h.apply(msg).await;
            }
        }
    }

    // The last frames may still be on their way through the link: wait until it has handled
    // every one (sent, or dropped as stale while no connection was up), or time out.
    let handled = |h: &Harness| {
        let f = h.engine.session_status().figures();
        f.sent + f.stale_audio_dropped
    };
    poll_async(
        Duration::from_secs(5),
        Duration::from_millis(5),
        async || (handled(&h) >= frames_sent).then_some(()),
    )
    .await;
    let (complete, interrupted) = complete_replies(&h);
    let figures = h.engine.session_status().figures();
    let rss_end = rss_bytes();
    let rss_start = rss_start.unwrap_or(rss_end);
    eprintln!(
        "soak: {:.0} s, {} turns ({} complete, {} interrupted), {} hand-overs ({} resumed), \
         {} mic frames sent ({} stale dropped while reconnecting), {:.1} MB model audio, \
         RSS start {:.1} MB, end {:.1} MB",
        started.elapsed().as_secs_f64(),
        utterances,
        complete,
        interrupted,
        h.app.handovers(),
        figures.resumed,
        frames_sent,
        figures.stale_audio_dropped,
        h.app.model_audio_bytes() as f64 / 1e6,
        rss_start as f64 / 1e6,
        rss_end as f64 / 1e6,
    );

    assert_eq!(complete, utterances, "every turn was answered");
    assert_eq!(interrupted, 0, "no reply was cut by a reconnect");
    // Each goAway is a planned hand-over, never a lost connection.
    assert_eq!(h.app.reconnects(), 0, "no connection was lost");
    assert!(
        h.app.handovers() as usize >= (utterances / 3).saturating_sub(1),
        "goAways every 3 turns: {} hand-overs for {utterances} turns",
        h.app.handovers()
    );
    assert_eq!(
        u64::from(h.app.handovers()),
        figures.resumed,
        "each resumed"
    );
    assert!(
        h.app
            .notices()
            .iter()
            .all(|n| n.level != livetalk::app::NoticeLevel::Error)
    );
    // Every frame went out or was dropped as stale while no connection was up; none waits.
    assert_eq!(figures.queued, 0);
    assert_eq!(
        figures.sent + figures.stale_audio_dropped,
        frames_sent,
        "frames handed over {frames_sent}, sent {}, stale {}",
        figures.sent,
        figures.stale_audio_dropped
    );
    let growth = rss_end.saturating_sub(rss_start);
    assert!(
        growth < 24 << 20,
        "RSS grew by {:.1} MB",
        growth as f64 / 1e6
    );
}
