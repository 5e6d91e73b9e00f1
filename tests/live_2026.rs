//! The 2026 service's behaviours against the mock, over a plain WebSocket (no livetalk client
//! code): per-model quirks chosen by the model id in `setup`, asynchronous turns on 3.8 Live,
//! and `contextUpdate`.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use serde_json::{Value, json};

use common::speech_pcm;
use common::ws::{self, Closed, JsonSocket, function_responses};
use livetalk_live::ApiVersion;
use livetalk_mock::{MockOptions, MockServer};

/// A mock and one connection to it, with everything received kept.
struct Session {
    socket: JsonSocket,
    _mock: MockServer,
}

/// The session is its connection, with the Live protocol's turns on top.
impl std::ops::Deref for Session {
    type Target = JsonSocket;

    fn deref(&self) -> &JsonSocket {
        &self.socket
    }
}

impl std::ops::DerefMut for Session {
    fn deref_mut(&mut self) -> &mut JsonSocket {
        &mut self.socket
    }
}

impl Session {
    /// Sends `setup` and returns the session, or how the mock refused it.
    async fn open(setup: Value) -> Result<Session, Closed> {
        Session::open_at(setup, ApiVersion::V1beta).await
    }

    /// Sends `setup` to the API `version` and returns the session, or how the mock refused it.
    async fn open_at(setup: Value, version: ApiVersion) -> Result<Session, Closed> {
        let mock = MockServer::start(MockOptions {
            speed: 40.0,
            ..MockOptions::loopback()
        })
        .await
        .unwrap();
        let url = mock.endpoint(version).url().to_owned();
        let mut session = Session {
            socket: JsonSocket::connect(url).await,
            _mock: mock,
        };
        session.send(json!({ "setup": setup })).await;
        session
            .until(|m| m.get("setupComplete").is_some())
            .await
            .map(|_| session)
    }

    async fn say(&mut self, text: &str) {
        self.send(json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}], "turnComplete": true}}))
            .await;
    }

    /// The messages of one model turn, up to its `turnComplete`.
    async fn turn(&mut self) -> Vec<Value> {
        self.until(|m| m["serverContent"]["turnComplete"] == true)
            .await
            .unwrap()
    }

    /// Answers the next toolCall with `response` for each call; returns the messages read.
    async fn answer(&mut self, response: Value) -> Vec<Value> {
        let read = self.until(|m| m.get("toolCall").is_some()).await.unwrap();
        let calls = &read.last().unwrap()["toolCall"]["functionCalls"];
        let answers = function_responses(calls, &response);
        self.send(json!({"toolResponse": {"functionResponses": answers}}))
            .await;
        read
    }
}

/// Words of the model: transcription and text parts that are not thoughts.
fn words(messages: &[Value]) -> String {
    messages
        .iter()
        .map(|m| ws::words(&m["serverContent"]))
        .collect()
}

fn lamp_tools(behavior: Option<&str>) -> Value {
    let mut declaration = json!({"name": "get_device_status",
        "parameters": {"type": "OBJECT", "properties": {"device_name": {"type": "STRING"}}}});
    if let Some(behavior) = behavior {
        declaration["behavior"] = json!(behavior);
    }
    json!([{"functionDeclarations": [declaration]}])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_3_8_turn_with_a_non_blocking_call_goes_on_after_turn_complete_until_idle() {
    let mut session = Session::open(json!({
        "model": "models/gemini-3.8-live",
        "generationConfig": {"responseModalities": ["TEXT"]},
        "tools": lamp_tools(Some("NON_BLOCKING")),
    }))
    .await
    .unwrap();
    session.say("Is the living room lamp on?").await;
    // The acknowledgement ends with turnComplete, but the interaction is in progress…
    let first = session.turn().await;
    assert_eq!(words(&first), "One moment, I'll check.");
    let end = &first.last().unwrap()["serverContent"];
    assert_eq!(end["interactionStatus"], "IN_PROGRESS", "{end}");
    // …an empty serverContent with only usage opened the model's first turn…
    assert_eq!(first[0]["serverContent"], json!({}), "{:?}", first[0]);
    assert!(first[0]["usageMetadata"]["promptTokenCount"].is_number());
    // …and the tool call follows the turnComplete.
    let before_call = session
        .answer(json!({"device_name": "living room lamp", "status": "off"}))
        .await;
    assert_eq!(before_call.len(), 1, "{before_call:#?}");
    let answer = session.turn().await;
    assert!(words(&answer).contains("off"), "{answer:#?}");
    let end = &answer.last().unwrap()["serverContent"];
    assert_eq!(end["interactionStatus"], "IDLE", "{end}");
    assert!(answer.last().unwrap()["usageMetadata"]["totalTokenCount"].is_number());
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_calls_on_3_8_finish_inside_the_turn_and_end_idle() {
    let mut session = Session::open(json!({
        "model": "models/gemini-3.8-live",
        "generationConfig": {"responseModalities": ["TEXT"]},
        "tools": lamp_tools(None),
    }))
    .await
    .unwrap();
    session.say("Is the living room lamp on?").await;
    let before_call = session.answer(json!({"status": "on"})).await;
    assert!(
        !before_call
            .iter()
            .any(|m| m["serverContent"]["turnComplete"] == true),
        "{before_call:#?}"
    );
    let answer = session.turn().await;
    assert_eq!(
        answer.last().unwrap()["serverContent"]["interactionStatus"],
        "IDLE"
    );
    // A question waits for the user, and says so.
    session.say("Thanks!").await;
    let asked = session.turn().await;
    assert!(words(&asked).ends_with('?'), "{asked:#?}");
    let end = &asked.last().unwrap()["serverContent"];
    assert_eq!(end["waitingForInput"], true, "{end}");
    assert_eq!(end["turnCompleteReason"], "NEED_MORE_INPUT", "{end}");
    assert_eq!(end["interactionStatus"], "IDLE", "{end}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_extended_thinking_model_takes_only_non_blocking_functions() {
    let refused = Session::open(json!({
        "model": "models/gemini-3.8-live-extended-thinking",
        "tools": lamp_tools(Some("BLOCKING")),
    }))
    .await
    .err()
    .unwrap();
    assert_eq!(refused.code, 1007, "{refused:?}");
    assert!(refused.reason.contains("NON_BLOCKING"), "{refused:?}");
    assert!(
        Session::open(json!({
            "model": "models/gemini-3.8-live-extended-thinking",
            "tools": lamp_tools(Some("NON_BLOCKING")),
        }))
        .await
        .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_text_modality_on_a_native_audio_model_is_refused_as_the_service_does() {
    let refused = Session::open(json!({
        "model": "models/gemini-2.5-flash-native-audio-preview-09-2025",
        "generationConfig": {"responseModalities": ["TEXT"]},
    }))
    .await
    .err()
    .unwrap();
    assert_eq!(refused.code, 1007);
    assert_eq!(
        refused.reason,
        "Cannot extract voices from a non-audio request."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn media_chunks_are_refused_where_the_service_refuses_them() {
    let chunk = json!({"realtimeInput": {"mediaChunks": [
        {"mimeType": "audio/pcm;rate=16000", "data": "AAAAAA=="}]}});
    let mut newer = Session::open(json!({"model": "models/gemini-3.8-live"}))
        .await
        .unwrap();
    newer.send(chunk.clone()).await;
    let refused = newer.until(|_| false).await.err().unwrap();
    assert_eq!(refused.code, 1007);
    assert_eq!(
        refused.reason,
        "realtime_input.media_chunks is deprecated. Use audio, video, or text instead."
    );
    // An older model still takes them (and answers a turn after).
    let mut older = Session::open(json!({"model": "models/gemini-2.5-flash-preview",
        "generationConfig": {"responseModalities": ["TEXT"]}}))
    .await
    .unwrap();
    older.send(chunk).await;
    older.say("Hello").await;
    let turn = older.turn().await;
    // No usage-only opening on older models either.
    assert!(turn[0]["serverContent"] != json!({}), "{turn:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn thought_parts_come_only_when_asked_for() {
    for include in [true, false] {
        let mut session = Session::open(json!({
            "model": "models/gemini-3.8-live",
            "generationConfig": {"responseModalities": ["TEXT"],
                "thinkingConfig": {"includeThoughts": include}},
        }))
        .await
        .unwrap();
        session.say("Hello").await;
        let turn = session.turn().await;
        let thoughts: Vec<&Value> = turn
            .iter()
            .flat_map(|m| {
                m["serverContent"]["modelTurn"]["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .filter(|p| p["thought"] == true)
            .collect();
        assert_eq!(thoughts.len(), usize::from(include), "{turn:#?}");
        assert!(!words(&turn).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn spoken_turns_bring_voice_activity_and_input_transcription_fragments() {
    let mut session = Session::open(json!({
        "model": "models/gemini-3.8-live",
        "inputAudioTranscription": {},
    }))
    .await
    .unwrap();
    // A second of tone, then silence, in 100 ms chunks.
    let pcm = speech_pcm(1000, 1500);
    use base64::Engine as _;
    for chunk in pcm.chunks(3200) {
        let data = base64::engine::general_purpose::STANDARD.encode(chunk);
        session
            .send(json!({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": data}}}))
            .await;
    }
    let turn = session.turn().await;
    let activity: Vec<&Value> = turn
        .iter()
        .filter_map(|m| {
            m["voiceActivity"]["type"]
                .as_str()
                .map(|_| &m["voiceActivity"]["type"])
        })
        .collect();
    assert_eq!(activity, [&json!("ACTIVITY_START"), &json!("ACTIVITY_END")]);
    let fragments: Vec<&Value> = turn
        .iter()
        .filter(|m| m["serverContent"]["inputTranscription"].is_object())
        .map(|m| &m["serverContent"]["inputTranscription"])
        .collect();
    assert_eq!(fragments.len(), 2, "{turn:#?}");
    let heard: String = fragments
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert!(heard.contains("seconds of speech"), "{heard}");
    assert_eq!(fragments[1]["finished"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retired_model_is_answered_with_the_services_error() {
    // The refusal names the API version the client dialled, as the service's does.
    for version in [ApiVersion::V1, ApiVersion::V1beta, ApiVersion::V1alpha] {
        let refused = Session::open_at(
            json!({"model": "models/gemini-live-2.5-flash-preview"}),
            version,
        )
        .await
        .err()
        .unwrap();
        assert_eq!(refused.code, 1008);
        let expected = format!(
            "models/gemini-live-2.5-flash-preview is not found for API version {}, ",
            version.as_str()
        );
        assert!(refused.reason.starts_with(&expected), "{refused:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn context_update_changes_the_instruction_with_or_without_a_role() {
    for role in [None, Some("user")] {
        let mut session = Session::open(json!({
            "model": "models/gemini-3.8-live",
            "generationConfig": {"responseModalities": ["TEXT"]},
            "tools": lamp_tools(None),
        }))
        .await
        .unwrap();
        session.say("Hello").await;
        let long = words(&session.turn().await);
        assert!(long.matches(". ").count() >= 1, "{long:?}");
        let mut instruction = json!({"parts": [{"text": "Answer briefly, in one sentence."}]});
        if let Some(role) = role {
            instruction["role"] = json!(role);
        }
        // As both SDKs send it; the service answers nothing, and the session goes on.
        session
            .send(json!({"contextUpdate": {"systemInstruction": instruction}}))
            .await;
        session.say("Hello").await;
        let brief = words(&session.turn().await);
        assert_eq!(brief, "Hello!", "{role:?}");
        // And a later instruction replaces it.
        session
            .send(json!({"contextUpdate": {"systemInstruction": {"parts": [{"text": "Be thorough."}]}}}))
            .await;
        session.say("Hello").await;
        assert_eq!(words(&session.turn().await), long);
    }
}

/// A JPEG of `width`×`height` pixels in one colour, base64, as a client sends a camera frame.
fn jpeg_base64(width: u32, height: u32, rgb: [u8; 3]) -> String {
    use base64::Engine as _;
    let mut jpeg = Vec::new();
    image::RgbImage::from_pixel(width, height, image::Rgb(rgb))
        .write_to(
            &mut std::io::Cursor::new(&mut jpeg),
            image::ImageFormat::Jpeg,
        )
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(jpeg)
}

/// The demo model answers a picture with what it can tell, as the official SDKs send it
/// (`realtimeInput.video`) and as older clients did (the legacy `mediaChunks`, on a model that
/// still takes them).
#[tokio::test(flavor = "multi_thread")]
async fn the_demo_model_names_the_size_and_colour_of_a_picture() {
    let mut session = Session::open(json!({"model": "models/gemini-3.8-live",
        "generationConfig": {"responseModalities": ["TEXT"]}}))
    .await
    .unwrap();
    let blue = jpeg_base64(320, 200, [30, 60, 220]);
    let blue_too = blue.clone();
    session
        .send(json!({"realtimeInput": {"video": {"mimeType": "image/jpeg", "data": blue}}}))
        .await;
    let said = words(&session.turn().await);
    assert!(
        said.contains("I see a 320 by 200 picture, mostly blue."),
        "{said}"
    );

    let mut older = Session::open(json!({"model": "models/gemini-2.5-flash-preview",
        "generationConfig": {"responseModalities": ["TEXT"]}}))
    .await
    .unwrap();
    let yellow = jpeg_base64(64, 48, [240, 225, 40]);
    older
        .send(
            json!({"realtimeInput": {"mediaChunks": [{"mimeType": "image/jpeg", "data": yellow}]}}),
        )
        .await;
    let said = words(&older.turn().await);
    assert!(
        said.contains("I see a 64 by 48 picture, mostly yellow."),
        "{said}"
    );
    // A frame right after it is one of a stream: taken in silently, and "what do you see?" is
    // answered from it. What is not a JPEG is said so, and the session goes on.
    older
        .send(json!({"realtimeInput": {"video": {"mimeType": "image/jpeg", "data": "bm90IGEgcGljdHVyZQ=="}}}))
        .await;
    older.say("What do you see?").await;
    let said = words(&older.turn().await);
    assert!(said.contains("could not make it out"), "{said}");
    older
        .send(json!({"realtimeInput": {"video": {"mimeType": "image/jpeg", "data": blue_too}}}))
        .await;
    older.say("what's on my screen?").await;
    let said = words(&older.turn().await);
    assert!(
        said.contains("I see a 320 by 200 picture, mostly blue."),
        "{said}"
    );
}
