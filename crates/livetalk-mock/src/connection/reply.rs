//! A reply as the service streams it: a thought summary when asked for, 40 ms chunks of 24 kHz
//! audio with transcription fragments (or text parts), `generationComplete`, then
//! `turnComplete` with usage, paced at the speed of speech.

use std::collections::VecDeque;
use std::time::Duration;

use livetalk_live::events::pcm16_to_le_bytes;
use livetalk_live::wire::{
    Blob, Content, FunctionCall, ModalityTokenCount, OUTPUT_AUDIO_MIME, OUTPUT_SAMPLE_RATE, Part,
    ServerContent, ServerMessage, Transcription, UsageMetadata,
};
use tokio::time::Instant;

use super::messages::server_content;
use super::setup::Settings;
use crate::flavor::Flavor;
use crate::voice;

/// Samples per streamed audio chunk: 40 ms at 24 kHz.
const CHUNK_SAMPLES: usize = 960;
/// Billing rate of audio, per the Live API docs.
pub(super) const AUDIO_TOKENS_PER_SECOND: f64 = 25.0;

/// Reply messages waiting to be streamed at the pace of speech.
pub(super) struct Speech {
    queue: VecDeque<ServerMessage>,
    interval: Duration,
    /// When the next message is due.
    pub(super) next_at: Instant,
    sent: usize,
    /// Words of the reply (a transcription fragment or a text part) have been sent.
    worded: bool,
    /// An acknowledgement of an asynchronous turn: these calls go out when it has been said,
    /// and the interaction goes on.
    pub(super) then_calls: Option<Vec<FunctionCall>>,
}

/// One message of a reply, and where it stands in the reply.
pub(super) struct Said {
    pub(super) message: Option<ServerMessage>,
    /// It is the reply's first message.
    pub(super) first: bool,
    /// It carries the reply's first words.
    pub(super) first_words: bool,
    /// It is the reply's last message.
    pub(super) finished: bool,
}

impl Speech {
    /// Queues the reply `text` (spoken as `pcm` when replies are audio): audio chunks with
    /// transcription fragments (or text parts), the `groundingMetadata` of a grounded reply,
    /// then `generationComplete`, then `turnComplete` with usage; with `then_calls`, as the
    /// acknowledgement of an asynchronous turn.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        text: &str,
        pcm: &[i16],
        then_calls: Option<Vec<FunctionCall>>,
        grounding: Option<serde_json::Value>,
        settings: &Settings,
        flavor: Flavor,
        prompt_tokens: f64,
        speed: f64,
    ) -> Speech {
        let mut queue = VecDeque::new();
        let role = (flavor == Flavor::Vertex).then(|| "model".to_owned());
        if settings.include_thoughts {
            queue.push_back(server_content(ServerContent {
                model_turn: Some(Content {
                    role: role.clone(),
                    parts: vec![Part {
                        text: Some(
                            format!(
                                "**Answering the user**\n\nI'll say: {}",
                                text.split_whitespace()
                                    .take(6)
                                    .collect::<Vec<_>>()
                                    .join(" ")
                            )
                            .into(),
                        ),
                        thought: Some(true),
                        ..Part::default()
                    }],
                }),
                ..ServerContent::default()
            }));
        }
        let mime = match flavor {
            Flavor::GoogleAi => OUTPUT_AUDIO_MIME,
            Flavor::Vertex => "audio/pcm",
        };
        let chunks = if settings.audio_out {
            pcm.len().div_ceil(CHUNK_SAMPLES).max(1)
        } else {
            text.split_whitespace().count().max(1)
        };
        let fragments = split_fragments(text, chunks);
        for (index, fragment) in fragments.into_iter().enumerate() {
            if settings.audio_out {
                let start = index * CHUNK_SAMPLES;
                let samples = &pcm[start.min(pcm.len())..(start + CHUNK_SAMPLES).min(pcm.len())];
                queue.push_back(server_content(ServerContent {
                    model_turn: Some(Content {
                        role: role.clone(),
                        parts: vec![Part {
                            inline_data: Some(Blob {
                                mime_type: mime.to_owned(),
                                data: pcm16_to_le_bytes(samples),
                            }),
                            ..Part::default()
                        }],
                    }),
                    ..ServerContent::default()
                }));
                if settings.transcribe_output && !fragment.is_empty() {
                    queue.push_back(server_content(ServerContent {
                        output_transcription: Some(Transcription {
                            text: Some(fragment.into()),
                            ..Transcription::default()
                        }),
                        ..ServerContent::default()
                    }));
                }
            } else if !fragment.is_empty() {
                queue.push_back(server_content(ServerContent {
                    model_turn: Some(Content {
                        role: role.clone(),
                        parts: vec![Part {
                            text: Some(fragment.into()),
                            ..Part::default()
                        }],
                    }),
                    ..ServerContent::default()
                }));
            }
        }
        if let Some(grounding) = grounding {
            queue.push_back(server_content(ServerContent {
                grounding_metadata: Some(grounding),
                ..ServerContent::default()
            }));
        }
        queue.push_back(server_content(ServerContent {
            generation_complete: Some(true),
            ..ServerContent::default()
        }));
        let spoken_seconds = if settings.audio_out {
            pcm.len() as f64 / f64::from(OUTPUT_SAMPLE_RATE)
        } else {
            voice::speaking_time(text).as_secs_f64()
        };
        queue.push_back(turn_complete(
            text,
            spoken_seconds,
            then_calls.is_some(),
            settings,
            prompt_tokens,
        ));
        let per_message = spoken_seconds / queue.len() as f64 / speed;
        Speech {
            queue,
            interval: interval(per_message),
            next_at: Instant::now(),
            sent: 0,
            worded: false,
            then_calls,
        }
    }

    /// Takes the next message of the reply; the one after it is due an interval later.
    pub(super) fn next(&mut self) -> Said {
        let message = self.queue.pop_front();
        self.sent += 1;
        let first = self.sent == 1;
        let first_words = !self.worded && message.as_ref().is_some_and(has_words);
        self.worded |= first_words;
        let finished = self.queue.is_empty();
        if !finished {
            self.next_at += self.interval;
        }
        Said {
            message,
            first,
            first_words,
            finished,
        }
    }

    /// Streams the rest of the reply `factor` times slower.
    pub(super) fn slow_down(&mut self, factor: f64) {
        self.interval = interval(self.interval.as_secs_f64() * factor);
    }
}

/// The longest pause between two messages of a reply, however slow the speed asked for.
const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// `seconds` as the pause between two messages: at most [`MAX_INTERVAL`], never a panic on a
/// speed so small the pause does not fit a `Duration`.
fn interval(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds)
        .unwrap_or(MAX_INTERVAL)
        .min(MAX_INTERVAL)
}

/// The reply's `turnComplete`, with the turn's usage beside it.
fn turn_complete(
    text: &str,
    spoken_seconds: f64,
    then_calls: bool,
    settings: &Settings,
    prompt_tokens: f64,
) -> ServerMessage {
    let async_turns = settings.traits.async_turns;
    let response_tokens = if settings.audio_out {
        (spoken_seconds * AUDIO_TOKENS_PER_SECOND).round() as i64
    } else {
        (text.len() as f64 / 4.0).ceil() as i64
    };
    let prompt_tokens = prompt_tokens.ceil() as i64;
    let modality = if settings.audio_out { "AUDIO" } else { "TEXT" };
    let question = text.trim_end().ends_with('?');
    let mut last = server_content(ServerContent {
        turn_complete: Some(true),
        // Models with asynchronous turns say where the interaction stands, and that they
        // wait for the user's answer to a question.
        interaction_status: async_turns
            .then(|| if then_calls { "IN_PROGRESS" } else { "IDLE" }.to_owned()),
        waiting_for_input: (async_turns && question).then_some(true),
        turn_complete_reason: (async_turns && question).then(|| "NEED_MORE_INPUT".to_owned()),
        ..ServerContent::default()
    });
    last.usage_metadata = Some(UsageMetadata {
        prompt_token_count: Some(prompt_tokens),
        response_token_count: Some(response_tokens),
        total_token_count: Some(prompt_tokens + response_tokens),
        prompt_tokens_details: vec![ModalityTokenCount {
            modality: "TEXT".into(),
            token_count: Some(prompt_tokens),
        }],
        response_tokens_details: vec![ModalityTokenCount {
            modality: modality.into(),
            token_count: Some(response_tokens),
        }],
        ..UsageMetadata::default()
    });
    last
}

/// True when a reply message carries words the client shows: a transcription fragment or a
/// text part (audio alone does not).
fn has_words(message: &ServerMessage) -> bool {
    let Some(content) = &message.server_content else {
        return false;
    };
    let transcribed = content
        .output_transcription
        .as_ref()
        .and_then(|t| t.text.as_deref())
        .is_some_and(|t| !t.trim().is_empty());
    let texted = content.model_turn.as_ref().is_some_and(|turn| {
        turn.parts
            .iter()
            .filter(|p| p.thought != Some(true))
            .any(|p| p.text.as_deref().is_some_and(|t| !t.trim().is_empty()))
    });
    transcribed || texted
}

/// Splits text into `parts` consecutive fragments whose concatenation is the text; words are
/// spread evenly so transcription keeps pace with the audio.
fn split_fragments(text: &str, parts: usize) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_whitespace() && !current.trim().is_empty() {
            current.push(c);
            words.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    let parts = parts.max(1);
    (0..parts)
        .map(|i| {
            let from = i * words.len() / parts;
            let to = (i + 1) * words.len() / parts;
            words[from..to].concat()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_rejoin_to_the_text() {
        let text = "No, the living room lamp is currently off.";
        for parts in [1, 3, 8, 50] {
            let fragments = split_fragments(text, parts);
            assert_eq!(fragments.len(), parts);
            assert_eq!(fragments.concat(), text);
        }
    }
}
