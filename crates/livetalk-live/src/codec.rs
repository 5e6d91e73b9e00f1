//! Frame codec: canonical JSON out, lenient JSON in, for both directions of the Live API.

use serde::de::DeserializeOwned;

use super::lenient::{append_base64, base64_len, decode_base64};
use super::wire::{
    Blob, ClientMessage, Content, Part, RealtimeInput, ServerContent, ServerMessage,
};

/// What a server frame turned out to be. Frames are decoded one at a time and moved once, so
/// the size difference between variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum DecodedServerFrame {
    /// A message with at least one known field (or `{}`, which the SDKs accept as empty).
    Message(ServerMessage),
    /// A JSON object with no known top-level key: logged and skipped, never fatal.
    Unknown {
        /// Its top-level keys, for the log line.
        keys: Vec<String>,
    },
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The payload is not UTF-8.
    #[error("frame is not UTF-8 text")]
    NotUtf8,
    /// The payload is not JSON (serde_json's message).
    #[error("frame is not valid JSON: {0}")]
    Json(String),
    /// The payload is JSON, but not an object.
    #[error("frame is not a JSON object")]
    NotAnObject,
    /// A field has a value of the wrong shape.
    #[error("invalid value at `{path}`: {message}")]
    Field {
        /// Where, as a path from the top (`serverContent.modelTurn.parts[0]`).
        path: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A client frame whose one key names no client message (the service closes with 1007).
    #[error("unknown client message `{0}`")]
    UnknownClientMessage(String),
    /// The frame would cost more to decode than the process's whole input budget (see
    /// [`crate::budget`]): refused before anything is decoded.
    #[error("{0}")]
    TooCostly(String),
}

/// Refuses, before anything is decoded, a frame that would cost more than the process's whole
/// input budget (its values are counted, not its bytes).
fn weigh(payload: &[u8]) -> Result<(), DecodeError> {
    crate::budget::InputBudget::process()
        .weigh(payload)
        .map(drop)
        .map_err(|refused| DecodeError::TooCostly(refused.to_string()))
}

/// Encodes a client message as one compact text frame.
pub fn encode_client(message: &ClientMessage) -> String {
    if let Some(audio) = lone_audio(message)
        && let Some(frame) = encode_audio_input(audio)
    {
        return frame;
    }
    serde_json::to_string(message).expect("wire types always serialize")
}

/// The blob of a `realtimeInput` that carries audio and nothing else: the mic's message, 50
/// times a second.
fn lone_audio(message: &ClientMessage) -> Option<&Blob> {
    // Every field named, no `..`: a field added to RealtimeInput must be weighed here, or this
    // path would drop it silently.
    match message {
        ClientMessage::RealtimeInput(RealtimeInput {
            audio: Some(audio),
            video: None,
            text: None,
            activity_start: None,
            activity_end: None,
            audio_stream_end: None,
            media_chunks,
        }) if media_chunks.is_empty() => Some(audio),
        _ => None,
    }
}

/// What serde_json writes for a lone-audio `realtimeInput`, without serde: the frame is a fixed
/// template around a MIME type and base64, which needs no escaping. A MIME type that would need
/// escaping goes the serde way (`None`). Tests hold the two ways byte-identical.
fn encode_audio_input(audio: &Blob) -> Option<String> {
    const HEAD: &str = r#"{"realtimeInput":{"audio":{"mimeType":""#;
    const DATA: &str = r#"","data":""#;
    const TAIL: &str = r#""}}}"#;
    let mime = &audio.mime_type;
    // RFC 8259 escapes exactly these inside a string; serde_json escapes nothing else.
    if mime.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return None;
    }
    let length = HEAD.len() + mime.len() + DATA.len() + base64_len(audio.data.len()) + TAIL.len();
    let mut frame = String::with_capacity(length);
    frame.push_str(HEAD);
    frame.push_str(mime);
    frame.push_str(DATA);
    append_base64(&audio.data, &mut frame);
    frame.push_str(TAIL);
    Some(frame)
}

/// Encodes a server message the way the service does: pretty-printed JSON with a trailing
/// newline, to be sent in a binary frame.
pub fn encode_server(message: &ServerMessage) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(message).expect("wire types always serialize");
    bytes.push(b'\n');
    bytes
}

/// Decodes a server frame (text or binary payload).
pub fn decode_server(payload: &[u8]) -> Result<DecodedServerFrame, DecodeError> {
    weigh(payload)?;
    match model_audio(payload) {
        // Built in place: the message is large and is moved on at once.
        Some(model_turn) => Ok(DecodedServerFrame::Message(ServerMessage {
            server_content: Some(ServerContent {
                model_turn: Some(model_turn),
                ..ServerContent::default()
            }),
            ..ServerMessage::default()
        })),
        None => decode_server_leniently(payload),
    }
}

/// The model turn of the frame the service sends most, 25 times a second while the model
/// speaks: one model turn of inline audio and nothing else. It is read borrowed, and its base64
/// is decoded straight from the frame; every struct of its shape refuses unknown keys, so any
/// other frame, and every error, goes to the lenient decoder, which decides as it always has.
/// Tests hold the two decoders equal on every frame this one accepts.
fn model_audio(payload: &[u8]) -> Option<Content> {
    let frame: audio_frame::Frame<'_> = serde_json::from_slice(payload).ok()?;
    let turn = frame.server_content.model_turn;
    let mut parts = Vec::with_capacity(turn.parts.len());
    for part in turn.parts {
        let blob = part.inline_data;
        parts.push(Part {
            inline_data: Some(Blob {
                mime_type: blob.mime_type,
                data: decode_base64(&*blob.data).ok()?,
            }),
            ..Part::default()
        });
    }
    Some(Content {
        role: turn.role,
        parts,
    })
}

/// The shape [`model_audio`] accepts, with the wire types' names and aliases.
mod audio_frame {
    use std::borrow::Cow;

    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Frame<'a> {
        #[serde(rename = "serverContent", alias = "server_content", borrow)]
        pub server_content: ServerContent<'a>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ServerContent<'a> {
        #[serde(rename = "modelTurn", alias = "model_turn", borrow)]
        pub model_turn: Content<'a>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Content<'a> {
        #[serde(default)]
        pub role: Option<String>,
        #[serde(borrow)]
        pub parts: Vec<Part<'a>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Part<'a> {
        #[serde(rename = "inlineData", alias = "inline_data", borrow)]
        pub inline_data: Blob<'a>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Blob<'a> {
        #[serde(rename = "mimeType", alias = "mime_type")]
        pub mime_type: String,
        /// Raw bytes, not `str`: serde_json then skips UTF-8 checking for the one long string
        /// in the frame, and base64 accepts only ASCII anyway.
        #[serde(borrow)]
        pub data: Cow<'a, [u8]>,
    }
}

/// The decoder for every server frame: lenient about spelling, types and unknown fields.
fn decode_server_leniently(payload: &[u8]) -> Result<DecodedServerFrame, DecodeError> {
    let message: ServerMessage = decode_with_path(payload)?;
    if !message.is_empty() {
        return Ok(DecodedServerFrame::Message(message));
    }
    // Rare path: find out which keys an empty-looking message had, for the log line.
    let object: serde_json::Map<String, serde_json::Value> = decode_with_path(payload)?;
    if object.is_empty() {
        Ok(DecodedServerFrame::Message(message))
    } else {
        Ok(DecodedServerFrame::Unknown {
            keys: object.keys().cloned().collect(),
        })
    }
}

/// Decodes a client frame (what the mock and the bridge receive).
pub fn decode_client(payload: &[u8]) -> Result<ClientMessage, DecodeError> {
    weigh(payload)?;
    match decode_with_path::<ClientMessage>(payload) {
        Ok(message) => Ok(message),
        Err(DecodeError::Field { path, message })
            if path == "." && message.starts_with("unknown variant") =>
        {
            let name = message.split('`').nth(1).unwrap_or("?").to_owned();
            Err(DecodeError::UnknownClientMessage(name))
        }
        Err(e) => Err(e),
    }
}

fn decode_with_path<T: DeserializeOwned>(payload: &[u8]) -> Result<T, DecodeError> {
    let text = std::str::from_utf8(payload).map_err(|_| DecodeError::NotUtf8)?;
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        return Err(if serde_json::from_str::<serde_json::Value>(text).is_ok() {
            DecodeError::NotAnObject
        } else {
            DecodeError::Json(short_json_error(text))
        });
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize(&mut deserializer) {
        Ok(value) => deserializer
            .end()
            .map(|()| value)
            .map_err(|e| DecodeError::Json(e.to_string())),
        Err(error) => {
            let path = error.path().to_string();
            let inner = error.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                Err(DecodeError::Json(inner.to_string()))
            } else {
                Err(DecodeError::Field {
                    path,
                    message: inner.to_string(),
                })
            }
        }
    }
}

fn short_json_error(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(_) => "not an object".to_owned(),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::*;
    use std::time::Duration;

    fn message(payload: &[u8]) -> ServerMessage {
        match decode_server(payload) {
            Ok(DecodedServerFrame::Message(m)) => m,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    // The Live API documentation's example frames, verbatim.
    #[test]
    fn golden_setup_complete_binary_pretty() {
        let m = message(b"{\n  \"setupComplete\": {\"sessionId\": \"test_session_id\"}\n}\n");
        assert_eq!(
            m.setup_complete.unwrap().session_id.as_deref(),
            Some("test_session_id")
        );
    }

    #[test]
    fn golden_inline_audio() {
        let m = message(br#"{"serverContent": {"modelTurn": {"parts":[{"inlineData": {"data": "MDAwMDAw", "mimeType": "audio/pcm" }}]}}}"#);
        let part = &m.server_content.unwrap().model_turn.unwrap().parts[0];
        let blob = part.inline_data.as_ref().unwrap();
        assert_eq!(blob.data, b"000000");
        assert_eq!(blob.mime_type, "audio/pcm");
    }

    #[test]
    fn golden_tool_call_without_id() {
        let m = message(br#"{"toolCall": {"functionCalls": [{"name": "get_current_weather", "args": {"location": "San Francisco", "unit": "C"}}]}}"#);
        let call = &m.tool_call.unwrap().function_calls[0];
        assert_eq!(call.name, "get_current_weather");
        assert_eq!(call.id, None);
        assert_eq!(call.args["location"], "San Francisco");
    }

    #[test]
    fn golden_transcriptions() {
        let m = message(br#"{"serverContent": {"inputTranscription": {"text": "test_input", "finished": true}}}"#);
        let t = m.server_content.unwrap().input_transcription.unwrap();
        assert_eq!(
            (t.text.as_deref(), t.finished),
            (Some("test_input"), Some(true))
        );
        let m = message(br#"{"serverContent": {"outputTranscription": {"text": "test_output", "finished": false}}}"#);
        let t = m.server_content.unwrap().output_transcription.unwrap();
        assert_eq!(
            (t.text.as_deref(), t.finished),
            (Some("test_output"), Some(false))
        );
    }

    #[test]
    fn golden_go_away() {
        let m = message(br#"{"goAway": {"timeLeft": "10s"}}"#);
        assert_eq!(m.go_away.unwrap().time_left, Some(Duration::from_secs(10)));
    }

    #[test]
    fn golden_resumption_update_with_string_bool_and_int64() {
        let m = message(br#"{"sessionResumptionUpdate": {"newHandle": "test_handle", "resumable": "true", "lastConsumedClientMessageIndex": "123456789"}}"#);
        let u = m.session_resumption_update.unwrap();
        assert_eq!(u.new_handle.as_deref(), Some("test_handle"));
        assert_eq!(u.resumable, Some(true));
        assert_eq!(u.last_consumed_client_message_index, Some(123_456_789));
    }

    #[test]
    fn golden_vad_signal() {
        let m = message(
            br#"{"voiceActivityDetectionSignal": {"vadSignalType": "VAD_SIGNAL_TYPE_SOS"}}"#,
        );
        assert_eq!(
            m.voice_activity_detection_signal
                .unwrap()
                .vad_signal_type
                .as_deref(),
            Some("VAD_SIGNAL_TYPE_SOS")
        );
    }

    #[test]
    fn golden_text_turn_with_reason() {
        let m = message(br#"{"serverContent": {"modelTurn": {"parts": [{"text": "Please provide more details."}]}, "turnComplete": true, "turnCompleteReason": "NEED_MORE_INPUT", "waitingForInput": true}}"#);
        let c = m.server_content.unwrap();
        assert_eq!(
            c.model_turn.unwrap().parts[0].text.as_deref(),
            Some("Please provide more details.")
        );
        assert_eq!(c.turn_complete, Some(true));
        assert_eq!(c.turn_complete_reason.as_deref(), Some("NEED_MORE_INPUT"));
        assert_eq!(c.waiting_for_input, Some(true));
    }

    #[test]
    fn golden_setup_complete_with_voice_consent() {
        let m = message(br#"{"setupComplete": {"sessionId": "test_session_id", "voiceConsentSignature": {"signature": "test_sig_abc123"}}}"#);
        assert!(m.setup_complete.is_some());
    }

    #[test]
    fn golden_js_recordings() {
        let m = message(br#"{"setupComplete":{}}"#);
        assert_eq!(m.setup_complete, Some(SetupComplete::default()));
        let m = message(br#"{"serverContent":{"outputTranscription":{"text":" could talk about anything you like."}}}"#);
        assert!(m.server_content.unwrap().output_transcription.is_some());
        let m = message(br#"{"serverContent":{"generationComplete":true}}"#);
        assert_eq!(m.server_content.unwrap().generation_complete, Some(true));
        let m = message(br#"{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":515,"responseTokenCount":31,"totalTokenCount":546,"promptTokensDetails":[{"modality":"TEXT","tokenCount":515}],"responseTokensDetails":[{"modality":"TEXT","tokenCount":31}]}}"#);
        assert_eq!(m.server_content.unwrap().turn_complete, Some(true));
        let usage = m.usage_metadata.unwrap();
        assert_eq!(usage.total_token_count, Some(546));
        assert_eq!(usage.response_tokens_details[0].token_count, Some(31));
        let m = message(br#"{"toolCall":{"functionCalls":[{"name":"get_current_weather","args":{"location":"Redmond, WA"},"id":"function-call-5831923424298605773"}]}}"#);
        assert_eq!(
            m.tool_call.unwrap().function_calls[0].id.as_deref(),
            Some("function-call-5831923424298605773")
        );
        let m = message(br#"{"serverContent":{"modelTurn":{"role":"model","parts":[{"inlineData":{"mimeType":"audio/pcm","data":"AAAA"}}]}}}"#);
        assert_eq!(
            m.server_content.unwrap().model_turn.unwrap().parts[0]
                .inline_data
                .as_ref()
                .unwrap()
                .data,
            [0, 0, 0]
        );
    }

    // Our own variants: snake_case everywhere, URL-safe base64, numbers as strings, Vertex names.
    #[test]
    fn snake_case_url_safe_and_vertex_variants() {
        let m = message(br#"{"server_content": {"model_turn": {"parts": [{"inline_data": {"mime_type": "audio/pcm;rate=24000", "data": "-_8"}}]}, "turn_complete": "true"}, "usage_metadata": {"candidates_token_count": "12", "prompt_token_count": 3}}"#);
        let c = m.server_content.unwrap();
        let blob = c.model_turn.unwrap().parts[0].inline_data.clone().unwrap();
        assert_eq!(blob.data, [0xfb, 0xff]);
        assert_eq!(blob.declared_rate(), Some(24_000));
        assert_eq!(c.turn_complete, Some(true));
        let usage = m.usage_metadata.unwrap();
        assert_eq!(usage.response_token_count, Some(12));
        assert_eq!(usage.prompt_token_count, Some(3));

        let m = message(br#"{"tool_call_cancellation": {"ids": ["function-call-1"]}, "go_away": {"time_left": "0.250s"}}"#);
        assert_eq!(m.tool_call_cancellation.unwrap().ids, ["function-call-1"]);
        assert_eq!(
            m.go_away.unwrap().time_left,
            Some(Duration::from_millis(250))
        );

        let m = message(br#"{"voiceActivity": {"type": "ACTIVITY_START", "audioOffset": "1.2s"}}"#);
        let v = m.voice_activity.unwrap();
        assert_eq!(v.activity_type.as_deref(), Some("ACTIVITY_START"));
        assert_eq!(v.audio_offset, Some(Duration::from_millis(1200)));
    }

    #[test]
    fn tool_call_args_keep_their_own_keys() {
        let m = message(br#"{"tool_call": {"function_calls": [{"id": "function-call-7", "name": "set_device_status", "args": {"device_name": "living room lamp", "new_status": "on"}}]}}"#);
        let call = &m.tool_call.unwrap().function_calls[0];
        assert_eq!(call.args["device_name"], "living room lamp");
        assert_eq!(call.args["new_status"], "on");
    }

    #[test]
    fn unknown_fields_are_ignored_and_unknown_messages_reported() {
        let m = message(
            br#"{"serverContent": {"turnComplete": true, "somethingNew": {"x": 1}}, "extra": 5}"#,
        );
        assert_eq!(m.server_content.unwrap().turn_complete, Some(true));
        assert_eq!(
            decode_server(br#"{"brandNewMessage": {}}"#),
            Ok(DecodedServerFrame::Unknown {
                keys: vec!["brandNewMessage".into()]
            })
        );
        assert_eq!(
            decode_server(b"{}"),
            Ok(DecodedServerFrame::Message(ServerMessage::default()))
        );
    }

    #[test]
    fn a_counter_out_of_range_loses_that_field_not_the_frame() {
        for count in [
            "1e30",
            "18446744073709551616",
            "9223372036854775808",
            "-1.5",
            "\"lots\"",
            "[1, 2]",
            "{\"n\": 1}",
            "true",
        ] {
            let frame = format!(
                r#"{{"serverContent":{{"turnComplete":true}},"usageMetadata":{{"promptTokenCount":{count},"totalTokenCount":7,"responseTokensDetails":[{{"modality":"AUDIO","tokenCount":{count}}}]}}}}"#
            );
            let m = message(frame.as_bytes());
            assert_eq!(
                m.server_content.unwrap().turn_complete,
                Some(true),
                "{count}"
            );
            let usage = m.usage_metadata.unwrap();
            assert_eq!(usage.prompt_token_count, None, "{count}");
            assert_eq!(usage.total_token_count, Some(7), "{count}");
            assert_eq!(
                usage.response_tokens_details[0].token_count, None,
                "{count}"
            );
        }
        // A goAway whose time left is no duration is still a goAway; a flag that is no
        // boolean is lost alone.
        for time_left in [
            r#""soon""#,
            r#""1e300s""#,
            r#""18446744073709551616s""#,
            "-3",
            "{}",
        ] {
            let frame = format!(r#"{{"goAway": {{"timeLeft": {time_left}}}}}"#);
            let go_away = message(frame.as_bytes()).go_away;
            assert_eq!(go_away, Some(GoAway { time_left: None }), "{time_left}");
        }
        let m = message(
            br#"{"serverContent":{"turnComplete":"maybe","modelTurn":{"parts":[{"text":"Hi"}]}}}"#,
        );
        let content = m.server_content.unwrap();
        assert_eq!(content.turn_complete, None);
        assert_eq!(
            content.model_turn.unwrap().parts[0].text.as_deref(),
            Some("Hi")
        );
        let m = message(br#"{"sessionResumptionUpdate":{"newHandle":"h","lastConsumedClientMessageIndex":1e300}}"#);
        let update = m.session_resumption_update.unwrap();
        assert_eq!(update.new_handle.as_deref(), Some("h"));
        assert_eq!(update.last_consumed_client_message_index, None);
    }

    #[test]
    fn malformed_frames_give_clear_errors() {
        assert_eq!(
            decode_server(&[0xff, 0xfe, 0x00]),
            Err(DecodeError::NotUtf8)
        );
        assert!(matches!(
            decode_server(b"{\"serverContent\": "),
            Err(DecodeError::Json(_))
        ));
        assert_eq!(decode_server(b"[1,2]"), Err(DecodeError::NotAnObject));
        let err = decode_server(br#"{"goAway": {"timeLeft": 5, "x": }}"#).unwrap_err();
        assert!(matches!(&err, DecodeError::Json(_)), "{err}");
        let err = decode_server(br#"{"serverContent": {"modelTurn": 5}}"#).unwrap_err();
        assert!(
            matches!(&err, DecodeError::Field { path, .. } if path == "serverContent.modelTurn"),
            "{err}"
        );
        let deep = "[".repeat(10_000);
        assert!(decode_server(format!("{{\"a\":{deep}").as_bytes()).is_err());
    }

    #[test]
    fn client_messages_encode_canonically() {
        let text = encode_client(&ClientMessage::ClientContent(ClientContent::user_text(
            "Hi",
        )));
        assert_eq!(
            text,
            r#"{"clientContent":{"turns":[{"role":"user","parts":[{"text":"Hi"}]}],"turnComplete":true}}"#
        );
        let audio = ClientMessage::RealtimeInput(RealtimeInput {
            audio: Some(Blob {
                mime_type: INPUT_AUDIO_MIME.into(),
                data: vec![0xfb, 0xff],
            }),
            ..RealtimeInput::default()
        });
        assert_eq!(
            encode_client(&audio),
            r#"{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"+/8="}}}"#
        );
        let setup = ClientMessage::Setup(Box::new(Setup {
            model: "models/x".into(),
            context_window_compression: Some(ContextWindowCompression {
                trigger_tokens: Some(25_600),
                sliding_window: Some(SlidingWindow {
                    target_tokens: Some(12_800),
                }),
            }),
            ..Setup::default()
        }));
        assert_eq!(
            encode_client(&setup),
            r#"{"setup":{"model":"models/x","contextWindowCompression":{"triggerTokens":"25600","slidingWindow":{"targetTokens":"12800"}}}}"#
        );
    }

    #[test]
    fn python_sdk_client_frames_decode() {
        let m = decode_client(br#"{"client_content": {"turns": [{"parts": [{"text": "Hello world!"}], "role": "user"}], "turnComplete": true}}"#).unwrap();
        assert_eq!(
            m,
            ClientMessage::ClientContent(ClientContent::user_text("Hello world!"))
        );
        let m = decode_client(br#"{"realtime_input": {"media_chunks": [{"mime_type": "audio/pcm", "data": "AAAA"}]}}"#).unwrap();
        let ClientMessage::RealtimeInput(input) = m else {
            panic!()
        };
        assert_eq!(input.media_chunks[0].data, [0, 0, 0]);
        let m = decode_client(br#"{"tool_response": {"functionResponses": [{"will_continue": true, "scheduling": "SILENT", "id": "function-call-1", "name": "f", "response": {"temperature": 14.5}}]}}"#).unwrap();
        let ClientMessage::ToolResponse(r) = m else {
            panic!()
        };
        assert_eq!(r.function_responses[0].scheduling, Some(Scheduling::Silent));
        assert_eq!(r.function_responses[0].will_continue, Some(true));
        let m = decode_client(br#"{"setup": {"model": "models/m", "generationConfig": {"responseModalities": ["AUDIO"], "speechConfig": {"voice_config": {"prebuilt_voice_config": {"voice_name": "Kore"}}}}, "realtimeInputConfig": {"automatic_activity_detection": {"disabled": false, "silence_duration_ms": 100}}, "contextWindowCompression": {"trigger_tokens": 25600, "sliding_window": {"target_tokens": "12800"}}, "tools": [{"function_declarations": [{"name": "f", "parameters_json_schema": {"type": "object"}}]}]}}"#).unwrap();
        let ClientMessage::Setup(setup) = m else {
            panic!()
        };
        let voice = setup
            .generation_config
            .unwrap()
            .speech_config
            .unwrap()
            .voice_config
            .unwrap();
        assert_eq!(voice.prebuilt_voice_config.unwrap().voice_name, "Kore");
        assert_eq!(
            setup
                .context_window_compression
                .unwrap()
                .sliding_window
                .unwrap()
                .target_tokens,
            Some(12_800)
        );
        assert_eq!(setup.tools[0].function_declarations[0].name, "f");
        assert_eq!(
            decode_client(br#"{"telepathy": {}}"#),
            Err(DecodeError::UnknownClientMessage("telepathy".into()))
        );
    }

    #[test]
    fn server_messages_encode_like_the_service() {
        let bytes = encode_server(&ServerMessage {
            setup_complete: Some(SetupComplete::default()),
            ..ServerMessage::default()
        });
        assert_eq!(bytes, b"{\n  \"setupComplete\": {}\n}\n");
    }

    /// The fast paths against the ways they short-cut, on frames built to sit on either side
    /// of the fast shapes' edges.
    mod fast_paths {
        use super::*;
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        use serde_json::{Value, json};
        use std::cell::Cell;

        /// A JSON tree whose objects may repeat a key, which `serde_json::Value` cannot.
        #[derive(Debug, Clone)]
        enum Node {
            Leaf(Value),
            Object(Vec<(&'static str, Node)>),
            Array(Vec<Node>),
        }

        impl Node {
            fn render(&self, pretty: bool, out: &mut String) {
                let gap = if pretty { "\n  " } else { "" };
                match self {
                    Node::Leaf(value) => out.push_str(&value.to_string()),
                    Node::Object(fields) => {
                        out.push('{');
                        for (i, (key, node)) in fields.iter().enumerate() {
                            if i > 0 {
                                out.push(',');
                            }
                            out.push_str(gap);
                            out.push_str(&Value::from(*key).to_string());
                            out.push_str(if pretty { ": " } else { ":" });
                            node.render(pretty, out);
                        }
                        out.push_str(if pretty { "\n}" } else { "}" });
                    }
                    Node::Array(items) => {
                        out.push('[');
                        for (i, node) in items.iter().enumerate() {
                            if i > 0 {
                                out.push(',');
                            }
                            node.render(pretty, out);
                        }
                        out.push(']');
                    }
                }
            }
        }

        /// An object with `key` (in one of its spellings) holding `inner`, now and then a
        /// stranger beside it, a repeated key, or the key missing.
        fn object(
            keys: &'static [&'static str],
            inner: impl Strategy<Value = Node>,
            strangers: &'static [(&'static str, &'static str)],
        ) -> impl Strategy<Value = Node> {
            (
                prop::sample::select(keys),
                inner,
                prop::option::weighted(0.15, prop::sample::select(strangers)),
                0..20u8,
            )
                .prop_map(|(key, inner, stranger, odd)| {
                    let mut fields = vec![(key, inner)];
                    if let Some((name, json)) = stranger {
                        let value = serde_json::from_str(json).expect("stranger JSON");
                        fields.insert(usize::from(odd % 2), (name, Node::Leaf(value)));
                    }
                    match odd {
                        0 => fields.push(fields[0].clone()),
                        1 => fields.retain(|(name, _)| *name != key),
                        _ => {}
                    }
                    Node::Object(fields)
                })
        }

        fn base64_text() -> impl Strategy<Value = Value> {
            let text =
                (prop::collection::vec(any::<u8>(), 0..48), 0..8u8).prop_map(|(bytes, style)| {
                    match style {
                        0 => URL_SAFE_NO_PAD.encode(&bytes),
                        1 => STANDARD_NO_PAD.encode(&bytes),
                        2 => format!("{} ", STANDARD.encode(&bytes)),
                        3 => STANDARD.encode(&bytes).replacen('A', "!", 1),
                        _ => STANDARD.encode(&bytes),
                    }
                });
            prop_oneof![
                12 => text.prop_map(Value::String),
                1 => Just(Value::Null),
                1 => Just(json!([1, 2])),
            ]
        }

        fn blob() -> impl Strategy<Value = Node> {
            let mime = prop_oneof![
                8 => prop::sample::select(&["audio/pcm;rate=24000", "audio/pcm", "", "ü"][..])
                    .prop_map(Value::from),
                1 => Just(Value::Null),
            ];
            (mime, base64_text(), 0..10u8).prop_map(|(mime, data, odd)| {
                let mime_key = if odd % 2 == 0 {
                    "mimeType"
                } else {
                    "mime_type"
                };
                let mut fields = vec![(mime_key, Node::Leaf(mime)), ("data", Node::Leaf(data))];
                match odd {
                    0 => fields.reverse(),
                    1 => {
                        fields.pop();
                    }
                    2 => fields.push(("displayName", Node::Leaf(json!("x")))),
                    3 => fields.push(fields[1].clone()),
                    _ => {}
                }
                Node::Object(fields)
            })
        }

        /// Frames shaped like the service's model audio, and their near neighbours.
        fn audio_frames() -> impl Strategy<Value = Vec<u8>> {
            let part = object(
                &["inlineData", "inline_data"],
                blob(),
                &[("text", r#""hi""#), ("thought", "true")],
            );
            let parts = prop::collection::vec(part, 0..3).prop_map(Node::Array);
            let role = prop_oneof![Just(json!("model")), Just(Value::Null), Just(json!(7))];
            let turn = (parts, prop::option::of(role)).prop_map(|(parts, role)| {
                let mut fields = vec![("parts", parts)];
                if let Some(role) = role {
                    fields.push(("role", Node::Leaf(role)));
                }
                Node::Object(fields)
            });
            let content = object(
                &["modelTurn", "model_turn"],
                turn,
                &[
                    ("turnComplete", "true"),
                    ("interrupted", r#""true""#),
                    ("new", "{}"),
                ],
            );
            let frame = object(
                &["serverContent", "server_content"],
                content,
                &[
                    ("usageMetadata", r#"{"totalTokenCount": 5}"#),
                    ("toolCall", "{}"),
                ],
            );
            (frame, any::<bool>(), 0..12u8, any::<usize>(), any::<u8>()).prop_map(
                |(frame, pretty, odd, at, byte)| {
                    let mut text = String::new();
                    frame.render(pretty, &mut text);
                    if odd == 0 {
                        // JSON may escape any slash, which base64 is full of.
                        text = text.replace('/', "\\/");
                    }
                    let mut bytes = text.into_bytes();
                    if odd == 1 {
                        let at = at % bytes.len();
                        bytes[at] = byte;
                    }
                    bytes
                },
            )
        }

        #[test]
        fn the_audio_fast_path_decodes_exactly_as_the_lenient_decoder() {
            let (fast, lenient) = (Cell::new(0u32), Cell::new(0u32));
            let mut runner = TestRunner::new(Config {
                cases: 4_000,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(&audio_frames(), |frame| {
                    let expected = decode_server_leniently(&frame);
                    if model_audio(&frame).is_some() {
                        fast.set(fast.get() + 1);
                    } else if matches!(expected, Ok(DecodedServerFrame::Message(_))) {
                        lenient.set(lenient.get() + 1);
                    }
                    prop_assert_eq!(decode_server(&frame), expected);
                    Ok(())
                })
                .unwrap();
            // Both sides of the edge were walked, or the property says little. The counts vary
            // with the random cases: a CI run once drew 795 fast ones against a floor of 800.
            assert!(fast.get() > 600, "fast path taken {} times", fast.get());
            assert!(lenient.get() > 300, "lenient only {} times", lenient.get());
        }

        #[test]
        fn the_mic_fast_path_writes_exactly_what_serde_writes() {
            let mime = prop_oneof![
                Just(INPUT_AUDIO_MIME.to_owned()),
                any::<String>(),
                Just("a\"b\\c\u{1}\u{7f}é".to_owned()),
            ];
            let extra = prop::option::weighted(0.2, any::<String>());
            let strategy = (mime, prop::collection::vec(any::<u8>(), 0..700), extra);
            let taken = Cell::new(0u32);
            let mut runner = TestRunner::new(Config {
                cases: 2_000,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(&strategy, |(mime_type, data, text)| {
                    let message = ClientMessage::RealtimeInput(RealtimeInput {
                        audio: Some(Blob { mime_type, data }),
                        text,
                        ..RealtimeInput::default()
                    });
                    if lone_audio(&message).and_then(encode_audio_input).is_some() {
                        taken.set(taken.get() + 1);
                    }
                    prop_assert_eq!(
                        encode_client(&message),
                        serde_json::to_string(&message).unwrap()
                    );
                    Ok(())
                })
                .unwrap();
            assert!(taken.get() > 500, "fast path taken {} times", taken.get());
        }
    }
}
