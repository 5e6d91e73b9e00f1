//! The session's own figures, as the session panel shows them: each turn's timing (defined in
//! `turn_timing`), interruptions, the session's health (connection age, a `goAway`'s
//! countdown, the resumption handle's age, the context against its compression trigger) and
//! what its tokens cost. Time comes in as data (each frame's stamp, the tick's), never read
//! here.

use std::time::{Duration, Instant};

use super::turn_timing::{Stamp, TurnClock};
use super::{App, WireBody, WireFrame};
use crate::pricing::{ModelPrices, TokenTally};
use livetalk_live::reading::Reading;
use livetalk_live::wire::UsageMetadata;

/// Turns whose figures are kept (the sparkline's width).
pub const TURNS_KEPT: usize = 20;

/// Stamps are measured from this long before the first moment the app was told of: a frame
/// sent before it but taken in after it still has a stamp of its own.
const ORIGIN_SLACK: Duration = Duration::from_secs(3600);

/// What the session panel shows besides the settings.
#[derive(Debug, Clone)]
pub struct PanelFigures {
    origin: Option<Instant>,
    /// The latest moment the app was told of.
    now: Option<Stamp>,
    turns: TurnClock,
    /// When the current connection's setup was answered.
    connected_at: Option<Stamp>,
    /// When a `goAway` came on this connection, and the time it left.
    go_away: Option<(Stamp, Option<Duration>)>,
    /// When the newest resumption handle came.
    handle_at: Option<Stamp>,
    /// Times the user silenced Gemini here (Ctrl-B, or typing over it).
    local_barge_ins: u32,
    /// Times the service interrupted a reply that was streaming.
    server_interruptions: u32,
    /// The newest report's prompt: the context the model holds.
    context_tokens: Option<u64>,
    /// Of those, the pictures' and video's (the prompt's per-modality counts).
    context_video: u64,
    /// Where the service compresses the context, when it is asked to.
    compression_trigger: Option<u64>,
    tally: TokenTally,
    /// The prices of the model now in use.
    prices: Option<ModelPrices>,
    /// What the tokens cost before the model last changed (`None`: some were of a model
    /// nobody priced), and the tally then: the tokens since are at [`Self::prices`].
    cost_before: Option<f64>,
    tally_before: TokenTally,
}

impl PanelFigures {
    pub fn new(prices: Option<ModelPrices>, compression_trigger: Option<u64>) -> Self {
        PanelFigures {
            origin: None,
            now: None,
            turns: TurnClock::new(TURNS_KEPT),
            connected_at: None,
            go_away: None,
            handle_at: None,
            local_barge_ins: 0,
            server_interruptions: 0,
            context_tokens: None,
            context_video: 0,
            compression_trigger,
            tally: TokenTally::default(),
            prices,
            cost_before: Some(0.0),
            tally_before: TokenTally::default(),
        }
    }

    /// `at` as a stamp; the first moment told of sets the origin.
    fn stamp(&mut self, at: Instant) -> Stamp {
        let origin = *self
            .origin
            .get_or_insert_with(|| at.checked_sub(ORIGIN_SLACK).unwrap_or(at));
        at.saturating_duration_since(origin)
    }

    /// The time is now `at` (a tick, or the moment before the speaker's news).
    pub(super) fn tell_time(&mut self, at: Instant) {
        let stamp = self.stamp(at);
        self.now = Some(self.now.map_or(stamp, |now| now.max(stamp)));
    }

    pub(super) fn on_frame(&mut self, frame: &WireFrame) {
        let stamp = self.stamp(frame.at);
        self.now = Some(self.now.map_or(stamp, |now| now.max(stamp)));
        match &frame.body {
            WireBody::Sent(message) => self.turns.sent(message, stamp),
            WireBody::Received { message, audio } => {
                let reading = Reading::of(message, audio);
                if reading.set_up().is_some() {
                    self.connected_at = Some(stamp);
                    self.go_away = None;
                }
                self.turns.received(reading, stamp);
            }
            WireBody::Unreadable(_) => self.turns.server_frame(false, stamp),
        }
    }

    pub(super) fn on_go_away(&mut self, time_left: Option<Duration>) {
        if let Some(now) = self.now {
            self.go_away = Some((now, time_left));
        }
    }

    pub(super) fn on_handle(&mut self) {
        self.handle_at = self.now;
    }

    pub(super) fn on_usage(&mut self, usage: &UsageMetadata) {
        self.tally.add(usage);
        if let Some(prompt) = usage.prompt_token_count {
            self.context_tokens = Some(prompt.max(0).unsigned_abs());
            self.context_video = crate::pricing::video_prompt_tokens(usage);
        }
    }

    pub(super) fn on_audible(&mut self) {
        if let Some(now) = self.now {
            self.turns.audible(now);
        }
    }

    pub(super) fn on_underruns(&mut self, total: u64) {
        self.turns.underruns(total);
    }

    pub(super) fn on_local_barge_in(&mut self) {
        self.local_barge_ins += 1;
    }

    pub(super) fn on_server_interruption(&mut self) {
        self.server_interruptions += 1;
    }

    /// The turns measured, oldest first (at most [`TURNS_KEPT`]).
    pub fn turns(&self) -> &TurnClock {
        &self.turns
    }

    /// How long the current connection has been up.
    pub fn connection_age(&self) -> Option<Duration> {
        Some(self.now?.saturating_sub(self.connected_at?))
    }

    /// Time left before the server ends this connection, after a `goAway` said how much.
    /// `Some(None)`: a `goAway` came without saying.
    pub fn go_away_left(&self) -> Option<Option<Duration>> {
        let (at, left) = self.go_away?;
        let now = self.now.unwrap_or(at);
        Some(left.map(|left| left.saturating_sub(now.saturating_sub(at))))
    }

    /// How old the newest resumption handle is.
    pub fn handle_age(&self) -> Option<Duration> {
        Some(self.now?.saturating_sub(self.handle_at?))
    }

    /// The context the model holds (the newest prompt), and where it gets compressed.
    pub fn context(&self) -> (Option<u64>, Option<u64>) {
        (self.context_tokens, self.compression_trigger)
    }

    /// Video's share of the context (pictures and frames), in percent: `None` while the
    /// context holds none.
    pub fn video_share(&self) -> Option<f64> {
        let held = self.context_tokens.filter(|&held| held > 0)?;
        (self.context_video > 0).then(|| self.context_video.min(held) as f64 * 100.0 / held as f64)
    }

    /// The session's tokens by modality.
    pub fn tally(&self) -> &TokenTally {
        &self.tally
    }

    /// What they cost so far, when the models' prices are known.
    pub fn cost(&self) -> Option<f64> {
        let since = self.tally.since(&self.tally_before);
        match (&self.prices, self.cost_before) {
            (Some(prices), Some(before)) => Some(before + since.cost(prices)),
            // Changed to a model nobody priced, which has not been used yet.
            (None, Some(before)) if since.total() == 0 && self.tally_before.total() > 0 => {
                Some(before)
            }
            _ => None,
        }
    }

    /// The model changed: the tokens so far keep their prices, later ones are at `prices`.
    pub(super) fn reprice(&mut self, prices: Option<ModelPrices>) {
        self.cost_before = self.cost();
        self.tally_before = self.tally;
        self.prices = prices;
    }

    /// Interruptions the user made: Ctrl-B, typing over Gemini, or speaking over it (the
    /// service's interruptions the echo detector did not blame on the speaker).
    pub fn user_barge_ins(&self, echo_blamed: u32) -> u32 {
        self.local_barge_ins
            + self
                .server_interruptions
                .saturating_sub(echo_blamed.min(self.server_interruptions))
    }
}

impl App {
    /// Latency, health and cost of the session so far.
    pub fn figures(&self) -> &PanelFigures {
        &self.figures
    }

    /// Interruptions the self-interruption detector blamed on Gemini's own voice.
    pub fn echo_interruptions(&self) -> u32 {
        let blamed = self.transcript.iter().filter(|entry| {
            matches!(
                entry,
                super::Entry::Model {
                    echo_suspected: true,
                    ..
                }
            )
        });
        u32::try_from(blamed.count()).unwrap_or(u32::MAX)
    }

    /// Interruptions the user made (see [`PanelFigures::user_barge_ins`]).
    pub fn user_barge_ins(&self) -> u32 {
        self.figures.user_barge_ins(self.echo_interruptions())
    }

    /// The user silences Gemini (Ctrl-B, or a typed turn while it speaks).
    pub(super) fn user_barge_in(&mut self) -> Vec<super::Effect> {
        if self.model_is_speaking() {
            self.figures.on_local_barge_in();
        }
        self.barge_in()
    }

    /// True while a `goAway` counts down (the TUI ticks to show it).
    pub(super) fn counting_down(&self) -> bool {
        self.figures
            .go_away_left()
            .is_some_and(|left| left.is_some_and(|l| !l.is_zero()))
            && self.connection == super::ConnectionState::Connected
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::app::{AppInit, Msg};
    use crate::audio::{AudioEvent, AudioFigures, AudioSetup};
    use crate::pricing::{PriceBook, PriceOverride};
    use livetalk_live::Inbound;
    use std::collections::BTreeMap;

    /// The Gemini API's host: Google bills sessions there.
    const GOOGLE: &str = "generativelanguage.googleapis.com";
    use livetalk_live::ServerEvent;
    use livetalk_live::wire::ClientMessage;

    /// A session on a priced model, as the app sees it from `start` on.
    struct PricedApp {
        app: App,
        start: Instant,
    }

    impl PricedApp {
        fn new(init: AppInit) -> Self {
            let mut session = PricedApp {
                app: App::new(init),
                start: Instant::now(),
            };
            session.received(0, r#"{"setupComplete":{}}"#);
            session
                .app
                .update(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
            session
        }

        /// A session on Google's own route, priced at the published prices.
        fn priced() -> Self {
            PricedApp::new(AppInit {
                price_book: PriceBook::for_host(GOOGLE, BTreeMap::new()),
                ..AppInit::new("models/gemini-3.8-live", false, Vec::new())
            })
        }

        fn at(&self, ms: u64) -> Instant {
            self.start + Duration::from_millis(ms)
        }

        fn frame(&mut self, ms: u64, body: WireBody) {
            let frame = WireFrame {
                at: self.at(ms),
                bytes: 100,
                handshake: false,
                elided: 0,
                missed_before: 0,
                body,
            };
            self.app.update(Msg::Wire(frame));
        }

        fn received(&mut self, ms: u64, json: &str) {
            let inbound = Inbound::message(serde_json::from_str(json).unwrap());
            let body = WireFrame::received(&inbound).unwrap().body;
            self.frame(ms, body);
            for event in inbound.events {
                self.app.update(Msg::Server(event));
            }
        }

        fn sent(&mut self, ms: u64, json: &str) {
            let message: ClientMessage = serde_json::from_str(json).unwrap();
            self.frame(ms, WireBody::Sent(Arc::new(message)));
        }

        fn model_audio(&mut self, ms: u64) {
            self.received(
                ms,
                r#"{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"AQACAA=="}}]}}}"#,
            );
        }

        /// The speaker started, as the engine tells it: the time, then the news.
        fn heard(&mut self, ms: u64) {
            self.app.update(Msg::Tick(self.at(ms)));
            self.app.update(Msg::Audio(AudioEvent::Audible(true)));
        }

        fn with_speaker(mut self) -> Self {
            self.app.update(Msg::Audio(
                AudioEvent::Opened(AudioSetup::mic_and_speaker()),
            ));
            self
        }

        fn last_turn(&self) -> TurnTiming {
            *self.app.figures().turns().last().expect("a turn")
        }
    }

    use crate::app::turn_timing::{TurnEnd, TurnTiming};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_typed_turn_is_timed_from_the_frame_that_sent_it() {
        let mut s = PricedApp::priced().with_speaker();
        s.app.update(Msg::UserText("turn on the lamp".into()));
        // The engine takes in what was sent with the server's next frame, after it.
        s.received(
            1120,
            r#"{"serverContent":{"outputTranscription":{"text":"Sure"}}}"#,
        );
        s.sent(
            1000,
            r#"{"clientContent":{"turns":[{"role":"user","parts":[{"text":"turn on the lamp"}]}],"turnComplete":true}}"#,
        );
        s.model_audio(1400);
        s.heard(1480);
        s.app.update(Msg::Audio(AudioEvent::Figures(AudioFigures {
            underruns: 2,
            ..AudioFigures::default()
        })));
        let turn = s.last_turn();
        assert_eq!(turn.ended_by, TurnEnd::Typed);
        assert_eq!(turn.first_message, Some(ms(120)));
        assert_eq!(turn.first_audio, Some(ms(400)));
        assert_eq!(turn.first_audible, Some(ms(480)));
        assert_eq!(turn.underruns, 2);
    }

    #[test]
    fn a_spoken_turn_is_timed_from_the_servers_voice_end() {
        let mut s = PricedApp::priced();
        s.received(500, r#"{"voiceActivity":{"type":"ACTIVITY_START"}}"#);
        s.received(2000, r#"{"voiceActivity":{"type":"ACTIVITY_END"}}"#);
        s.received(
            2090,
            r#"{"serverContent":{"inputTranscription":{"text":"hi"}}}"#,
        );
        s.model_audio(2350);
        let turn = s.last_turn();
        assert_eq!(turn.ended_by, TurnEnd::VoiceEnd);
        assert_eq!(turn.first_message, Some(ms(90)));
        assert_eq!(turn.first_audio, Some(ms(350)));
        assert_eq!(turn.first_audible, None, "no speaker");
        // Push-to-talk: the user's own activityEnd.
        s.sent(5000, r#"{"realtimeInput":{"activityEnd":{}}}"#);
        s.model_audio(5210);
        assert_eq!(s.last_turn().ended_by, TurnEnd::ActivityEnd);
        assert_eq!(s.last_turn().first_audio, Some(ms(210)));
        assert_eq!(s.app.figures().turns().turns().len(), 2);
    }

    #[test]
    fn barge_ins_are_the_users_unless_the_echo_was_blamed() {
        let mut s = PricedApp::priced().with_speaker();
        // Ctrl-B while Gemini is heard.
        s.model_audio(100);
        s.heard(150);
        s.app.update(Msg::BargeIn);
        assert_eq!(s.app.user_barge_ins(), 1);
        // Ctrl-B with nothing to silence is no barge-in.
        s.app.update(Msg::BargeIn);
        assert_eq!(s.app.user_barge_ins(), 1);
        s.app.update(Msg::Server(ServerEvent::TurnComplete {
            reason: None,
            waiting_for_input: false,
        }));
        // The service interrupts a reply; the detector clears the mic: the user spoke.
        s.model_audio(1000);
        s.heard(1050);
        s.received(1500, r#"{"serverContent":{"interrupted":true}}"#);
        s.app
            .update(Msg::Audio(AudioEvent::Silenced { echo_heard: false }));
        assert_eq!((s.app.user_barge_ins(), s.app.echo_interruptions()), (2, 0));
        // Again, and this time the mic carried Gemini's own voice.
        s.model_audio(2000);
        s.heard(2050);
        s.received(2500, r#"{"serverContent":{"interrupted":true}}"#);
        s.app
            .update(Msg::Audio(AudioEvent::Silenced { echo_heard: true }));
        assert_eq!((s.app.user_barge_ins(), s.app.echo_interruptions()), (2, 1));
    }

    #[test]
    fn a_go_away_counts_down_with_the_time_the_app_is_told() {
        let mut s = PricedApp::priced();
        s.received(
            60_000,
            r#"{"sessionResumptionUpdate":{"newHandle":"h1","resumable":true}}"#,
        );
        s.received(540_000, r#"{"goAway":{"timeLeft":"50s"}}"#);
        let figures = s.app.figures();
        assert_eq!(figures.go_away_left(), Some(Some(Duration::from_secs(50))));
        assert!(s.app.animating(), "the countdown ticks");
        s.app.update(Msg::Tick(s.at(552_000)));
        let figures = s.app.figures();
        assert_eq!(figures.go_away_left(), Some(Some(Duration::from_secs(38))));
        assert_eq!(figures.connection_age(), Some(Duration::from_secs(552)));
        assert_eq!(figures.handle_age(), Some(Duration::from_secs(492)));
        // The hand-over's new connection: a fresh age, and no countdown.
        s.received(590_000, r#"{"setupComplete":{}}"#);
        s.app.update(Msg::Tick(s.at(600_000)));
        let figures = s.app.figures();
        assert_eq!(figures.go_away_left(), None);
        assert_eq!(figures.connection_age(), Some(Duration::from_secs(10)));
    }

    const USAGE: &str = r#"{"usageMetadata":{"promptTokenCount":10000,"responseTokenCount":5000,"totalTokenCount":15000,
        "promptTokensDetails":[{"modality":"TEXT","tokenCount":2000},{"modality":"AUDIO","tokenCount":8000}],
        "responseTokensDetails":[{"modality":"AUDIO","tokenCount":5000}]}}"#;

    #[test]
    fn tokens_are_priced_at_the_published_prices_or_the_configs() {
        let mut s = PricedApp::priced();
        s.received(1000, USAGE);
        s.received(2000, USAGE);
        let tally = s.app.figures().tally();
        assert_eq!(
            (tally.text_in, tally.audio_in, tally.audio_out),
            (4000, 16000, 10000)
        );
        // 4000 × 0.75 + 16000 × 3 + 10000 × 12, per million.
        let cost = s.app.figures().cost().unwrap();
        assert!((cost - 0.171).abs() < 1e-9, "{cost}");
        assert_eq!(s.app.figures().context(), (Some(10_000), None));

        let mut s = PricedApp::new(AppInit {
            price_book: book("gemini-3.8-live", 20.0),
            compression_trigger: Some(104_857),
            ..AppInit::new("models/gemini-3.8-live", false, Vec::new())
        });
        s.received(1000, USAGE);
        let cost = s.app.figures().cost().unwrap();
        // 2000 × 0.75 + 8000 × 3 + 5000 × 20, per million.
        assert!((cost - 0.1255).abs() < 1e-9, "{cost}");
        assert_eq!(s.app.figures().context(), (Some(10_000), Some(104_857)));
    }

    /// A price book where `model`'s audio out costs `audio_out`.
    fn book(model: &str, audio_out: f64) -> PriceBook {
        PriceBook::for_host(
            GOOGLE,
            [(
                model.to_owned(),
                PriceOverride {
                    audio_out: Some(audio_out),
                    ..PriceOverride::default()
                },
            )]
            .into(),
        )
    }

    #[test]
    fn tokens_keep_the_price_of_the_model_they_were_spent_on() {
        let mut s = PricedApp::new(AppInit {
            price_book: book("gemini-3.1-flash-live-preview", 0.0),
            ..AppInit::new("models/gemini-3.8-live", false, Vec::new())
        });
        s.received(1000, USAGE);
        // 2000 × 0.75 + 8000 × 3 + 5000 × 12, per million.
        let cost = s.app.figures().cost().unwrap();
        assert!((cost - 0.0855).abs() < 1e-9, "{cost}");
        s.app
            .update(Msg::UserText("/model gemini-3.1-flash-live-preview".into()));
        assert_eq!(s.app.figures().cost(), Some(cost), "nothing spent yet");
        s.received(2000, USAGE);
        // The new model's audio out is free in this book: 2000 × 0.75 + 8000 × 3 more.
        let cost = s.app.figures().cost().unwrap();
        assert!((cost - 0.111).abs() < 1e-9, "{cost}");
        // A model nobody priced: what was spent before stands until it is used.
        s.app.update(Msg::UserText(
            "/model gemini-2.5-flash-native-audio-preview-09-2025".into(),
        ));
        assert_eq!(s.app.figures().cost(), Some(cost));
        s.received(3000, USAGE);
        assert_eq!(s.app.figures().cost(), None);
        assert_eq!(s.app.figures().tally().total(), 45_000);
    }

    #[test]
    fn the_offline_demo_model_counts_tokens_and_costs_nothing() {
        let mut s = PricedApp::new(AppInit::new("models/gemini-3.8-live", true, Vec::new()));
        s.received(1000, USAGE);
        assert_eq!(s.app.figures().tally().total(), 15_000);
        assert_eq!(s.app.figures().cost(), None);
    }
}
