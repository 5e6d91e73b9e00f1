//! The app's view of audio: which devices are open, the mic's state (live, muted, gated,
//! push-to-talk), levels and figures, and the rules that turn audio events, barge-in, mute and
//! push-to-talk into state and effects. Playback drives "Gemini is speaking…" when a speaker is
//! open; without one, the wire does.

use serde::{Deserialize, Serialize};

use crate::audio::{
    AudioEvent, AudioFigures, AudioOptions, AudioSetup, Direction, EchoFigures, EchoMode,
    StreamInfo,
};

use super::{App, Effect, Floor, MediaEffect, ModelTurnStatus, Msg, NoticeLevel, SessionEffect};
use livetalk_live::ServerEvent;

/// What the microphone is doing, as the status line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MicState {
    /// No microphone (none found, failed, or audio is off).
    Off,
    /// Frames go to the session.
    Live,
    Muted,
    /// The echo gate sends silence while Gemini is heard.
    Gated,
    /// Push-to-talk, waiting for the talk key.
    PushToTalk,
    /// Push-to-talk, talking.
    Talking,
}

impl MicState {
    pub fn label(self) -> &'static str {
        match self {
            MicState::Off => "off",
            MicState::Live => "live",
            MicState::Muted => "muted",
            MicState::Gated => "gated",
            MicState::PushToTalk => "push-to-talk",
            MicState::Talking => "talking",
        }
    }
}

/// What an echo mode does, as the notice and the audio popup say it.
pub fn echo_meaning(mode: EchoMode) -> &'static str {
    match mode {
        EchoMode::Aec => "echo is cancelled, so you can talk over Gemini",
        EchoMode::Gate => "the mic sends silence while Gemini is heard",
        EchoMode::Off => "the mic is always sent (for headphones)",
    }
}

/// The audio a session asked for, as far as the app's state depends on it. A recording keeps
/// it, so a replay shows the mic as the original did and answers its recorded keys (a
/// reopen, push-to-talk) as it did, rather than as if audio were off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AudioAsked {
    /// A microphone (a device, or an input WAV).
    pub microphone: bool,
    /// The mic is a WAV file, not a device.
    pub input_wav: bool,
    /// Model audio also goes to a WAV file.
    pub output_wav: bool,
    pub push_to_talk: bool,
    pub echo: EchoMode,
}

impl From<&AudioOptions> for AudioAsked {
    fn from(options: &AudioOptions) -> AudioAsked {
        let clip = options.input_wav.is_some();
        AudioAsked {
            microphone: options.microphone && (options.devices || clip),
            input_wav: clip,
            output_wav: options.output_wav.is_some(),
            push_to_talk: options.push_to_talk,
            echo: options.echo,
        }
    }
}

/// Audio as the app knows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AudioState {
    /// Audio was asked for at all (devices or WAV files).
    pub enabled: bool,
    /// Devices were opened (or tried) at least once.
    pub opened: bool,
    /// A microphone (or input WAV) was asked for; a replay only plays.
    pub mic_wanted: bool,
    pub input: Option<StreamInfo>,
    pub output: Option<StreamInfo>,
    /// The mic is a WAV file, not a device.
    pub input_is_clip: bool,
    /// The WAV file is still being streamed: the user's input has not ended.
    pub clip_streaming: bool,
    /// The server heard speech of the clip (its voice detection started, or it transcribed
    /// some) and has not begun to answer it: the end of input waits for that answer.
    pub clip_heard: bool,
    /// Model audio also goes to a WAV file.
    pub output_wav: bool,
    /// Why a device is missing.
    pub problems: Vec<String>,
    pub muted: bool,
    pub push_to_talk: bool,
    pub talking: bool,
    pub echo: EchoMode,
    /// Model audio is being heard.
    pub audible: bool,
    pub mic_level: f32,
    pub output_level: f32,
    pub figures: AudioFigures,
    /// The device mic's voice processing: the echo canceller's state (none without one).
    pub echo_figures: Option<EchoFigures>,
    /// After a local barge-in the rest of that model turn is not played or shown.
    pub discard_turn: bool,
    /// Model audio was handed to the speaker and has not finished playing: a headless run
    /// must not end before it has been heard.
    pub playing_out: bool,
}

impl AudioState {
    /// Audio as asked for, before any device has opened.
    pub fn configured(asked: AudioAsked) -> AudioState {
        AudioState {
            enabled: true,
            mic_wanted: asked.microphone,
            push_to_talk: asked.push_to_talk,
            echo: asked.echo,
            input_is_clip: asked.input_wav,
            clip_streaming: asked.input_wav,
            output_wav: asked.output_wav,
            ..AudioState::default()
        }
    }

    pub fn mic_state(&self) -> MicState {
        if self.input.is_none() {
            MicState::Off
        } else if self.muted {
            MicState::Muted
        } else if self.push_to_talk {
            if self.talking {
                MicState::Talking
            } else {
                MicState::PushToTalk
            }
        } else if self.echo == EchoMode::Gate && self.audible && !self.input_is_clip {
            MicState::Gated
        } else {
            MicState::Live
        }
    }

    /// Model audio is played (or written): the engine should be handed it.
    pub fn takes_model_audio(&self) -> bool {
        self.output.is_some() || self.output_wav
    }

    /// A speaker is open, so audible playback (not the wire) says when Gemini speaks.
    pub fn playback_drives_speaking(&self) -> bool {
        self.output.is_some()
    }

    /// An interruption by the service now may be Gemini hearing itself: its voice is heard on
    /// the speaker, and the self-interruption detector says what the mic sends followed it.
    pub fn echo_suspected(&self) -> bool {
        self.audible && self.echo_figures.is_some_and(|f| f.echo_heard)
    }

    fn mic_open(&self) -> bool {
        !self.muted && (!self.push_to_talk || self.talking)
    }
}

impl App {
    pub(super) fn on_audio(&mut self, event: AudioEvent) -> Vec<Effect> {
        match event {
            AudioEvent::Opened(setup) => self.audio_opened(setup),
            AudioEvent::DeviceFailed { direction, message } => {
                // No verdict will come from a closed device.
                self.echo_verdict(false);
                let what = match direction {
                    Direction::Input => {
                        self.audio.input = None;
                        "microphone"
                    }
                    Direction::Output => {
                        self.audio.output = None;
                        self.audio.audible = false;
                        self.audio.playing_out = false;
                        if self.floor == Floor::Speaking {
                            self.floor = Floor::Listening;
                        }
                        "speaker"
                    }
                };
                let then = if self.interactive {
                    "Text chat goes on; F6 opens the audio devices again."
                } else {
                    "Text chat goes on."
                };
                self.notice(
                    NoticeLevel::Error,
                    format!("The {what} stopped working ({message}). {then}"),
                );
                Vec::new()
            }
            AudioEvent::Audible(audible) => {
                self.audio.audible = audible;
                if audible {
                    self.figures.on_audible();
                }
                if !audible {
                    self.audio.playing_out = false;
                }
                if self.audio.playback_drives_speaking() && self.connection_open() {
                    self.floor = if audible {
                        Floor::Speaking
                    } else {
                        Floor::Listening
                    };
                }
                Vec::new()
            }
            AudioEvent::Silenced { echo_heard } => {
                self.echo_verdict(echo_heard);
                Vec::new()
            }
            AudioEvent::Echo(figures) => {
                self.audio.echo = figures.mode;
                self.audio.echo_figures = Some(figures);
                Vec::new()
            }
            AudioEvent::Levels { mic, output } => {
                self.audio.mic_level = mic;
                self.audio.output_level = output;
                Vec::new()
            }
            AudioEvent::Figures(figures) => {
                self.figures.on_underruns(figures.underruns);
                self.audio.figures = figures;
                Vec::new()
            }
            AudioEvent::OutputWavFull { path, max_bytes } => {
                self.notice(
                    NoticeLevel::Warning,
                    format!(
                        "{path} reached its size cap of {}; the rest of the model's audio is not written to it (--output-wav-max-mb, audio.output_wav_max_mb).",
                        livetalk_live::excerpt::human_size(max_bytes)
                    ),
                );
                Vec::new()
            }
            AudioEvent::InputClipEnded => {
                // The stream went on with silence long enough for voice detection; the
                // model's open turn, once it starts, holds the session.
                self.audio.clip_streaming = false;
                if self.audio.push_to_talk && self.audio.talking {
                    // The clip was one utterance and this ends it: its reply is awaited, so
                    // the end of input waits for it too.
                    self.audio.talking = false;
                    self.audio.clip_heard = false;
                    self.reply.sent();
                    return vec![
                        Effect::Media(MediaEffect::SetMicOpen(false)),
                        Effect::Session(SessionEffect::SendActivityEnd),
                    ];
                }
                if std::mem::take(&mut self.audio.clip_heard) {
                    // Heard and not yet answered (a server slower than the silence after the
                    // clip): the reply is awaited, or the end of input would close the
                    // session before it came.
                    self.reply.sent();
                }
                Vec::new()
            }
        }
    }

    /// Follows whether the server has heard the input clip's speech and not yet begun to
    /// answer it (see [`AudioState::clip_heard`]).
    pub(super) fn note_clip_speech(&mut self, event: &ServerEvent) {
        match event {
            ServerEvent::VoiceActivity { speaking: true }
            | ServerEvent::InputTranscription { .. }
                if self.audio.clip_streaming =>
            {
                self.audio.clip_heard = true;
            }
            ServerEvent::ModelText(_)
            | ServerEvent::ModelAudio { .. }
            | ServerEvent::OutputTranscription { .. }
            | ServerEvent::ToolCall(_)
            | ServerEvent::TurnComplete { .. } => self.audio.clip_heard = false,
            _ => {}
        }
    }

    fn audio_opened(&mut self, setup: AudioSetup) -> Vec<Effect> {
        let first = !self.audio.opened;
        self.audio.opened = true;
        self.audio.input = setup.input;
        self.audio.output = setup.output;
        let nothing_opened = self.audio.input.is_none() && self.audio.output.is_none();
        if !setup.problems.is_empty() {
            // Device errors often end in their own full stop; the notice adds one.
            let problems = setup
                .problems
                .iter()
                .map(|p| p.trim_end_matches('.'))
                .collect::<Vec<_>>()
                .join("; ");
            let text = if nothing_opened {
                let what_to_do = if self.interactive {
                    crate::audio::device::NO_DEVICES_IN_SESSION
                } else {
                    crate::audio::device::NO_DEVICES_IN_A_RUN
                };
                format!("No audio device ({problems}). {what_to_do}.")
            } else {
                format!("Audio: {problems}.")
            };
            self.notice(NoticeLevel::Warning, text);
        } else if !first {
            self.notice(NoticeLevel::Info, "Audio devices opened again.".to_owned());
        }
        self.audio.problems = setup.problems;
        // A clip in push-to-talk mode is one utterance: bracket it now (once connected).
        let mut effects = vec![Effect::Media(MediaEffect::SetMicOpen(
            self.audio.mic_open(),
        ))];
        if self.audio.push_to_talk && self.audio.input_is_clip && first {
            self.audio.talking = true;
            effects = vec![
                Effect::Media(MediaEffect::SetMicOpen(true)),
                Effect::Session(SessionEffect::SendActivityStart),
            ];
        }
        effects
    }

    fn connection_open(&self) -> bool {
        matches!(
            self.connection,
            super::ConnectionState::Connected | super::ConnectionState::Reconnecting
        )
    }

    /// Model audio arrived: play it unless a barge-in discards the rest of this turn.
    pub(super) fn on_model_audio(&mut self, pcm: Vec<u8>) -> Vec<Effect> {
        self.model_audio_bytes += pcm.len() as u64;
        // Nothing more of a reply the user cut off, or of a session they are ending.
        if self.audio.discard_turn || self.closing {
            return Vec::new();
        }
        if !self.audio.playback_drives_speaking() {
            self.floor = Floor::Speaking;
        }
        // An audio-only reply (no transcription) is still a turn of the conversation.
        self.open_model_entry();
        if self.audio.takes_model_audio() {
            self.audio.playing_out = self.audio.output.is_some();
            vec![Effect::Media(MediaEffect::PlayAudio(pcm))]
        } else {
            Vec::new()
        }
    }

    /// The model's turn ended (complete or interrupted by the server): play out or flush, and
    /// the next turn's audio is heard again.
    pub(super) fn end_model_audio(&mut self, interrupted: bool) -> Vec<Effect> {
        self.audio.discard_turn = false;
        if !self.audio.takes_model_audio() {
            return Vec::new();
        }
        if interrupted {
            self.audio.audible = false;
            self.audio.playing_out = false;
            vec![Effect::Media(MediaEffect::StopPlayback)]
        } else {
            vec![Effect::Media(MediaEffect::EndPlaybackTurn)]
        }
    }

    /// Gemini is talking (audibly, or its turn is still streaming).
    pub fn model_is_speaking(&self) -> bool {
        self.audio.audible || self.model_turn_streaming()
    }

    /// Barge-in (key, or typing while Gemini speaks): silence now, and ignore the rest of the
    /// model's turn; what was already heard stays in the transcript, marked interrupted.
    pub(super) fn barge_in(&mut self) -> Vec<Effect> {
        if !self.model_is_speaking() {
            return Vec::new();
        }
        self.finish_model_entry(ModelTurnStatus::Interrupted);
        self.audio.discard_turn = true;
        self.audio.audible = false;
        self.audio.playing_out = false;
        self.floor = Floor::Listening;
        if self.audio.takes_model_audio() {
            vec![Effect::Media(MediaEffect::StopPlayback)]
        } else {
            Vec::new()
        }
    }

    pub(super) fn toggle_mute(&mut self) -> Vec<Effect> {
        if self.audio.input.is_none() {
            self.notice(
                NoticeLevel::Info,
                "There is no microphone to mute.".to_owned(),
            );
            return Vec::new();
        }
        self.audio.muted = !self.audio.muted;
        let mut effects = vec![Effect::Media(MediaEffect::SetMicOpen(
            self.audio.mic_open(),
        ))];
        if self.audio.muted && self.connection_open() {
            if self.audio.push_to_talk && self.audio.talking {
                self.audio.talking = false;
                effects.push(Effect::Session(SessionEffect::SendActivityEnd));
            } else if !self.audio.push_to_talk {
                // The server flushes the audio it has cached (protocol: audioStreamEnd).
                effects.push(Effect::Session(SessionEffect::SendAudioStreamEnd));
            }
        }
        effects
    }

    /// True when audio is on; otherwise an audio key explains why it does nothing.
    fn audio_is_on(&mut self) -> bool {
        if !self.audio.enabled {
            self.notice(
                NoticeLevel::Info,
                "Audio is off (--no-audio or audio.enabled = false).".to_owned(),
            );
        }
        self.audio.enabled
    }

    pub(super) fn reopen_audio(&mut self) -> Vec<Effect> {
        if !self.audio_is_on() {
            return Vec::new();
        }
        vec![Effect::Media(MediaEffect::ReopenAudio)]
    }

    /// The echo key: the next mode, as an intent (a replay only shows what was switched).
    pub(super) fn switch_echo(&mut self) -> Vec<Effect> {
        if self.is_replay() || !self.audio_is_on() {
            return Vec::new();
        }
        self.intent(Msg::SetEcho(self.audio.echo.next()))
    }

    /// The mode changes now (the worker's figures confirm it), and is said.
    pub(super) fn set_echo(&mut self, mode: EchoMode) -> Vec<Effect> {
        self.audio.echo = mode;
        self.notice(
            NoticeLevel::Info,
            format!("Echo handling: {} — {}", mode.name(), echo_meaning(mode)),
        );
        vec![Effect::Media(MediaEffect::SetEcho(mode))]
    }

    pub(super) fn toggle_talk(&mut self) -> Vec<Effect> {
        if !self.audio.push_to_talk {
            self.notice(
                NoticeLevel::Info,
                "Push-to-talk is off: the server hears you whenever you speak (start with --push-to-talk to use F5).".to_owned(),
            );
            return Vec::new();
        }
        if self.audio.input.is_none() || self.audio.muted || !self.connection_open() {
            return Vec::new();
        }
        self.audio.talking = !self.audio.talking;
        if self.audio.talking {
            // Talking over Gemini interrupts it, as speaking would with server VAD.
            let mut effects = self.barge_in();
            effects.extend([
                Effect::Media(MediaEffect::SetMicOpen(true)),
                Effect::Session(SessionEffect::SendActivityStart),
            ]);
            effects
        } else {
            vec![
                Effect::Media(MediaEffect::SetMicOpen(false)),
                Effect::Session(SessionEffect::SendActivityEnd),
            ]
        }
    }
}
