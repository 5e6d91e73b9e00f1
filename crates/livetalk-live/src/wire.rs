//! The Live API (BidiGenerateContent) wire types, once, for client, mock, recorder and bridge.
//!
//! We always write canonical proto3-JSON (camelCase, int64 as strings, standard base64) and read
//! leniently: every multi-word field also accepts its snake_case spelling (the Python SDK sends a
//! mix), numbers may be strings, base64 may be URL-safe, unknown fields are ignored.
//!
//! The messages a client sends are defined in `wire/client.rs`, the ones a server sends in
//! `wire/server.rs`, and what both carry (contents and their parts) here; all are used as
//! `wire::…`.

mod client;
mod server;

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use self::client::*;
pub use self::server::*;
use crate::lenient;

/// MIME type of the 16 kHz PCM16 audio we stream up.
pub const INPUT_AUDIO_MIME: &str = "audio/pcm;rate=16000";
/// MIME type of the 24 kHz PCM16 audio the model streams down.
pub const OUTPUT_AUDIO_MIME: &str = "audio/pcm;rate=24000";
/// Sample rate of microphone audio sent to the Live API.
pub const INPUT_SAMPLE_RATE: u32 = 16_000;
/// Sample rate of model audio received from the Live API.
pub const OUTPUT_SAMPLE_RATE: u32 = 24_000;

/// Text a peer sent (a text part, a transcription), held once however many values refer to
/// it: a message and the events made of it share one copy, so a megabyte text part waiting to
/// be applied is held once, not twice. Reads as a `&str`; written and read as a JSON string.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Text(Arc<str>);

impl Text {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Text {
        Text(Arc::from(text))
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text(Arc::from(text))
    }
}

impl From<&String> for Text {
    fn from(text: &String) -> Text {
        Text(Arc::from(text.as_str()))
    }
}

impl From<Text> for String {
    fn from(text: Text) -> String {
        text.0.to_string()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Text;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            // Straight from the frame into the shared copy, with no `String` between.
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Text, E> {
                Ok(Text::from(text))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// A `Content`: a role and its parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// `user` or `model`; the service leaves it out of most server messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts, in order.
    #[serde(default)]
    pub parts: Vec<Part>,
}

impl Content {
    /// A content holding one text part.
    pub fn text(role: &str, text: impl Into<Text>) -> Self {
        Content {
            role: Some(role.to_owned()),
            parts: vec![Part {
                text: Some(text.into()),
                ..Part::default()
            }],
        }
    }
}

/// One `Part` of a content; exactly one data field is normally set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// Inline bytes: model audio, or an image.
    #[serde(
        default,
        alias = "inline_data",
        skip_serializing_if = "Option::is_none"
    )]
    pub inline_data: Option<Blob>,
    /// A function call, in history the client sends back.
    #[serde(
        default,
        alias = "function_call",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_call: Option<FunctionCall>,
    /// A function's answer, in history the client sends back.
    #[serde(
        default,
        alias = "function_response",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_response: Option<FunctionResponse>,
    /// Code the model wrote for the code-execution tool, passed through as given.
    #[serde(
        default,
        alias = "executable_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub executable_code: Option<Value>,
    /// What that code printed, passed through as given.
    #[serde(
        default,
        alias = "code_execution_result",
        skip_serializing_if = "Option::is_none"
    )]
    pub code_execution_result: Option<Value>,
    /// `true` on thought summaries, which are not part of the spoken reply.
    #[serde(
        default,
        with = "lenient::opt_bool",
        skip_serializing_if = "Option::is_none"
    )]
    pub thought: Option<bool>,
    /// An opaque signature of the model's thinking, to send back with the history.
    #[serde(
        default,
        alias = "thought_signature",
        skip_serializing_if = "Option::is_none"
    )]
    pub thought_signature: Option<String>,
}

/// Inline bytes with a MIME type (audio, video frames).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    /// `audio/pcm;rate=16000` for mic audio, `audio/pcm;rate=24000` for model audio, `image/jpeg` for a video frame.
    #[serde(default, alias = "mime_type")]
    pub mime_type: String,
    /// The bytes; base64 on the wire.
    #[serde(default, with = "lenient::base64_bytes")]
    pub data: Vec<u8>,
}

impl Blob {
    /// Sample rate declared in an `audio/pcm;rate=N` MIME type, if any.
    pub fn declared_rate(&self) -> Option<u32> {
        // The service's own spelling, on every audio frame, needs no parsing.
        match self.mime_type.as_str() {
            OUTPUT_AUDIO_MIME => return Some(OUTPUT_SAMPLE_RATE),
            INPUT_AUDIO_MIME => return Some(INPUT_SAMPLE_RATE),
            _ => {}
        }
        self.mime_type
            .split(';')
            .filter_map(|p| p.trim().strip_prefix("rate="))
            .find_map(|r| r.trim().parse().ok())
    }
}
