//! The translator alone, no sockets: every app message kind, every server message and event
//! the bridge forwards, and the errors an app is told.

use serde_json::{Value, json};

use super::*;
use crate::bridge::live_config::LiveConfig;
use livetalk_live::events::CloseInfo;

fn app(value: Value) -> AppMessage {
    AppMessage::decode(value.to_string().as_bytes()).unwrap()
}

fn server(value: Value) -> Inbound {
    Inbound::message(serde_json::from_value(value).unwrap())
}

/// What the messages are on the wire, for comparing without their dates.
fn wire(messages: &[BridgeMessage]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let mut value: Value = serde_json::from_str(&m.encode()).unwrap();
            if let Some(payload) = value["payload"].as_object_mut() {
                payload.remove("date");
            }
            value
        })
        .collect()
}

fn error_text(reply: &Reply) -> String {
    match reply.to_app.as_slice() {
        [BridgeMessage::GeminiError { message, .. }] => message.clone(),
        other => panic!("not one error: {other:?}"),
    }
}

const CONNECT: &str = r#"{"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/m",
    "tools": [{"functionDeclarations": [{"name": "later", "defaultBehavior": "NON_BLOCKING", "defaultScheduling": "WHEN_IDLE"}]}],
    "fancy": 1}}}"#;

/// A translator with an open session, set up.
fn open() -> Translator {
    let mut translator = Translator::new();
    let reply = translator.app(AppMessage::decode(CONNECT.as_bytes()).unwrap());
    let Some(SessionStep::Open {
        config: mapped,
        resume: None,
    }) = reply.session
    else {
        panic!("{reply:?}")
    };
    let (warnings, setup) = translator.opening(mapped, None);
    assert!(warnings.is_empty());
    assert_eq!(setup.session_resumption.unwrap().handle, None);
    translator.opened();
    let out = translator.inbound(server(json!({"setupComplete": {}})));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "SETUP_COMPLETE", "payload": {"setupComplete": {"success": true}, "success": true}})
        ]
    );
    translator
}

#[test]
fn connect_warns_of_unknown_keys_then_opens() {
    let mut translator = Translator::new();
    let reply = translator.app(AppMessage::decode(CONNECT.as_bytes()).unwrap());
    let kinds: Vec<&str> = reply.to_app.iter().map(BridgeMessage::kind).collect();
    assert_eq!(kinds, ["LOG_MESSAGE", "GEMINI_CONNECTED"]);
    assert!(
        wire(&reply.to_app)[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("`fancy`")
    );
    assert!(reply.to_live.is_empty());
    assert!(matches!(reply.session, Some(SessionStep::Open { .. })));
    // Not open until the loop says it connected.
    assert!(!translator.is_open());
}

#[test]
fn a_connect_that_cannot_be_used_or_fails_is_one_sequence() {
    let mut translator = Translator::new();
    let reply = translator.app(app(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {}}}),
    ));
    let kinds: Vec<&str> = reply.to_app.iter().map(BridgeMessage::kind).collect();
    assert_eq!(
        kinds,
        [
            "GEMINI_CONNECTED",
            "SETUP_COMPLETE",
            "GEMINI_ERROR",
            "GEMINI_DISCONNECTED"
        ]
    );
    assert!(reply.session.is_none());
    let failed = translator.setup_failed(Some(1008), "Refused.".into());
    assert_eq!(
        wire(&failed),
        [
            json!({"type": "SETUP_COMPLETE", "payload": {"setupComplete": {"success": false, "error": {"code": 1008, "message": "Refused."}}, "success": false, "error": {"code": 1008, "message": "Refused."}}}),
            json!({"type": "GEMINI_ERROR", "payload": {"message": "Refused."}}),
            json!({"type": "GEMINI_DISCONNECTED", "payload": {"reason": "Refused."}}),
        ]
    );
    assert!(!translator.is_open());
}

#[test]
fn messages_for_a_session_need_one_open() {
    let mut translator = Translator::new();
    for message in [
        json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"text": "hi"}]}}),
        json!({"type": "SEND_REALTIME_INPUT", "payload": {"text": "hi"}}),
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {"functionResponses": []}}}),
        json!({"type": "UPDATE_CONFIG", "payload": {"model": "m"}}),
        json!({"type": "CONTEXT_UPDATE", "payload": {"systemInstruction": {"parts": [{"text": "x"}]}}}),
    ] {
        let kind = message["type"].as_str().unwrap().to_owned();
        let reply = translator.app(app(message));
        assert_eq!(
            error_text(&reply),
            format!("No Gemini session is open: send CONNECT_GEMINI first ({kind} was ignored).")
        );
        assert!(reply.to_live.is_empty() && reply.session.is_none());
    }
    // And a second CONNECT_GEMINI is refused while one is.
    let mut translator = open();
    let reply = translator.app(AppMessage::decode(CONNECT.as_bytes()).unwrap());
    assert!(error_text(&reply).contains("already open"));
    assert!(reply.session.is_none());
}

#[test]
fn webrtc_signalling_goes_to_the_loop_and_images_are_declined_at_once() {
    let mut translator = Translator::new();
    // Before any session: the loop holds it until the session is set up.
    let reply = translator.app(app(
        json!({"type": "WEBRTC_OFFER", "payload": {"sdp": "v=0"}}),
    ));
    assert_eq!(reply.media, Some(MediaStep::Offer("v=0".into())));
    assert!(reply.to_app.is_empty() && reply.to_live.is_empty());
    let reply = translator.app(app(json!({"type": "WEBRTC_ICE_CANDIDATE",
        "payload": {"candidate": {"candidate": "candidate:1", "sdpMid": "0"}}})));
    assert!(matches!(reply.media, Some(MediaStep::Candidate(c)) if c.candidate == "candidate:1"));
    let reply = translator.app(AppMessage::GenerateImage);
    assert!(matches!(
        reply.to_app.as_slice(),
        [BridgeMessage::ImageGenerationResult(result)] if !result.success && result.error.as_deref().unwrap().contains("cannot generate images")
    ));
}

#[test]
fn a_user_turn_becomes_client_content() {
    let mut translator = open();
    let reply = translator.app(app(
        json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"text": "Hello"}], "turnComplete": false}}),
    ));
    assert!(reply.to_app.is_empty());
    assert_eq!(
        serde_json::to_value(&reply.to_live).unwrap(),
        json!([{"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Hello"}]}], "turnComplete": false}}])
    );
    // No parts: just the turn's end.
    let reply = translator.app(AppMessage::SendMessage {
        parts: Vec::new(),
        turn_complete: true,
    });
    assert_eq!(
        serde_json::to_value(&reply.to_live).unwrap(),
        json!([{"clientContent": {"turnComplete": true}}])
    );
    let reply = translator.app(app(
        json!({"type": "CONTEXT_UPDATE", "payload": {"systemInstruction": {"parts": [{"text": "Be brief."}]}}}),
    ));
    assert_eq!(reply.to_live.len(), 1);
    assert!(matches!(reply.to_live[0], ClientMessage::ContextUpdate(_)));
}

#[test]
fn realtime_input_goes_one_item_a_message_in_order() {
    let mut translator = open();
    let reply = translator.app(app(json!({"type": "SEND_REALTIME_INPUT", "payload": {
        "activityEnd": {}, "text": "hi", "audio": {"mimeType": "audio/pcm;rate=16000", "data": "AAA="},
        "activityStart": {}, "audioStreamEnd": true}})));
    assert!(reply.to_app.is_empty());
    assert_eq!(
        serde_json::to_value(&reply.to_live).unwrap(),
        json!([
            {"realtimeInput": {"activityStart": {}}},
            {"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": "AAA="}}},
            {"realtimeInput": {"text": "hi"}},
            {"realtimeInput": {"activityEnd": {}}},
            {"realtimeInput": {"audioStreamEnd": true}},
        ])
    );
    // Deprecated chunks: the first is used, with a warning.
    let reply = translator.app(app(
        json!({"type": "SEND_REALTIME_INPUT", "payload": {"chunks": [
        {"mimeType": "image/jpeg", "data": "AQ=="}, {"mimeType": "audio/pcm", "data": "AA=="}]}}),
    ));
    assert!(
        wire(&reply.to_app)[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("first of 2")
    );
    assert_eq!(
        serde_json::to_value(&reply.to_live).unwrap(),
        json!([{"realtimeInput": {"video": {"mimeType": "image/jpeg", "data": "AQ=="}}}])
    );
    // Audio that is not audio, and nothing at all, are refused.
    let reply = translator.app(app(json!({"type": "SEND_REALTIME_INPUT", "payload": {
        "audio": {"mimeType": "image/png", "data": "AA=="}}})));
    assert!(error_text(&reply).contains("audio MIME type"));
    assert!(reply.to_live.is_empty());
    let reply = translator.app(app(json!({"type": "SEND_REALTIME_INPUT", "payload": {}})));
    assert!(error_text(&reply).contains("at least one of"));
    assert!(reply.to_live.is_empty());
}

#[test]
fn tool_answers_are_checked_and_completed_from_the_call() {
    let mut translator = open();
    let out = translator.inbound(server(json!({"toolCall": {"functionCalls": [
        {"id": "c1", "name": "later", "args": {}}, {"id": "c2", "name": "other", "args": {"a": 1}}]}})));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "TOOL_CALL", "payload": {"toolCall": {"functionCalls": [
            {"id": "c1", "name": "later", "args": {}}, {"id": "c2", "name": "other", "args": {"a": 1}}]}}})
        ]
    );
    // A missing name comes from the call; a bare value is wrapped; the default scheduling of a
    // NON_BLOCKING function is added.
    let reply = translator.app(app(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": [{"id": "c1", "response": 42}]}}}),
    ));
    assert!(reply.to_app.is_empty(), "{:?}", reply.to_app);
    assert_eq!(
        serde_json::to_value(&reply.to_live).unwrap(),
        json!([{"toolResponse": {"functionResponses": [
            {"id": "c1", "name": "later", "response": {"output": 42}, "scheduling": "WHEN_IDLE"}]}}])
    );
    // Answered: a second answer, named or not, reaches nobody, and the app is told.
    for answer in [
        json!({"id": "c1", "response": {}}),
        json!({"id": "c1", "name": "later", "response": {}}),
    ] {
        let reply = translator.app(app(
            json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
            "functionResponses": [answer]}}}),
        ));
        assert!(
            error_text(&reply).contains("answers no pending call (id \"c1\")"),
            "{reply:?}"
        );
        assert!(reply.to_live.is_empty());
    }
    // Nor does an answer for an id never asked, even beside a good one: the message is
    // checked whole.
    let reply = translator.app(app(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": [{"id": "c2", "response": {}}, {"id": "zz", "name": "other", "response": {}}]}}}),
    ));
    assert!(error_text(&reply).contains("functionResponses[1] answers no pending call"));
    assert!(reply.to_live.is_empty());
    let reply = translator.app(app(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": [{"id": "", "name": "other", "response": {}}]}}}),
    ));
    assert!(error_text(&reply).contains("needs the `id`"));
    let reply = translator.app(app(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": []}}}),
    ));
    assert!(error_text(&reply).contains("needs toolResponse.functionResponses"));
    // A cancelled call is forgotten too.
    let out = translator.inbound(server(json!({"toolCallCancellation": {"ids": ["c2"]}})));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "TOOL_CALL_CANCELLATION", "payload": {"toolCallCancellation": {"ids": ["c2"]}}})
        ]
    );
    // An answer already on its way when the app was told: dropped with a warning, not an
    // error, and never sent.
    let reply = translator.app(app(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": [{"id": "c2", "response": {}}]}}}),
    ));
    assert_eq!(
        wire(&reply.to_app),
        [json!({"type": "LOG_MESSAGE", "payload": {"type": "warn",
            "message": "The answer to 1 cancelled call(s) (c2) came after TOOL_CALL_CANCELLATION and was not sent."}})]
    );
    assert!(reply.to_live.is_empty());
}

#[test]
fn model_audio_content_and_turns_reach_the_app_in_order() {
    let mut translator = open();
    let out = translator.inbound(server(json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQI="}},
        {"text": "hi"},
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AwQ="}}]},
        "groundingMetadata": {"x": 1}}, "usageMetadata": {"totalTokenCount": 3}})));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "ASSISTANT_SPEAKING", "payload": {"speaking": true}}),
            json!({"type": "AUDIO_CHUNK", "payload": {"data": "AQI="}}),
            json!({"type": "AUDIO_CHUNK", "payload": {"data": "AwQ="}}),
            json!({"type": "CONTENT_MESSAGE", "payload": {"serverContent": {"modelTurn": {"parts": [{"text": "hi"}]},
                "groundingMetadata": {"x": 1}, "usageMetadata": {"totalTokenCount": 3}}}}),
            json!({"type": "groundingMetadata", "payload": {"groundingMetadata": {"x": 1}}}),
        ]
    );
    // Still speaking: no second ASSISTANT_SPEAKING until the turn ends.
    let audio = json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm", "data": "AQI="}}]}}});
    let kinds = |out: Vec<BridgeMessage>| -> Vec<String> {
        out.iter().map(|m| m.kind().to_owned()).collect()
    };
    assert_eq!(
        kinds(translator.inbound(server(audio.clone()))),
        ["AUDIO_CHUNK"]
    );
    assert_eq!(
        kinds(translator.inbound(server(json!({"serverContent": {"interrupted": true}})))),
        ["CONTENT_MESSAGE", "INTERRUPTED"]
    );
    assert_eq!(
        kinds(translator.inbound(server(audio.clone()))),
        ["ASSISTANT_SPEAKING", "AUDIO_CHUNK"]
    );
    let out = translator.inbound(server(json!({"serverContent": {"turnComplete": true,
        "turnCompleteReason": "NEED_MORE_INPUT", "waitingForInput": true}})));
    assert_eq!(
        wire(&out)[1],
        json!({"type": "TURN_COMPLETE", "payload": {"reason": "NEED_MORE_INPUT", "waitingForInput": true}})
    );
    assert_eq!(
        kinds(translator.inbound(server(audio.clone()))),
        ["ASSISTANT_SPEAKING", "AUDIO_CHUNK"]
    );
    // With a WebRTC track, the track says when the model is heard: the WebSocket still
    // gets the audio, and no ASSISTANT_SPEAKING of the translator's.
    translator.inbound(server(json!({"serverContent": {"turnComplete": true}})));
    translator.set_media_track(true);
    assert_eq!(kinds(translator.inbound(server(audio))), ["AUDIO_CHUNK"]);
    assert!(matches!(
        translator.track_audio(vec![1, 2]),
        Some(ClientMessage::RealtimeInput(input)) if input.audio.as_ref().is_some_and(|a| a.data == [1, 2])
    ));
    // Usage alone, voice activity, goAway.
    assert_eq!(
        wire(&translator.inbound(server(json!({"usageMetadata": {"totalTokenCount": 9}})))),
        [
            json!({"type": "CONTENT_MESSAGE", "payload": {"serverContent": {"usageMetadata": {"totalTokenCount": 9}}}})
        ]
    );
    assert_eq!(
        wire(&translator.inbound(server(json!({"voiceActivity": {"type": "ACTIVITY_START"}})))),
        [
            json!({"type": "VOICE_ACTIVITY", "payload": {"voiceActivity": {"type": "ACTIVITY_START"}}})
        ]
    );
    let out = wire(&translator.inbound(server(json!({"goAway": {"timeLeft": "5s"}}))));
    assert!(
        out[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("in 5 s (goAway)"),
        "{out:?}"
    );
    // A resumption update is the supervisor's.
    assert!(
        translator
            .inbound(server(
                json!({"sessionResumptionUpdate": {"newHandle": "h", "resumable": true}})
            ))
            .is_empty()
    );
}

#[test]
fn the_sessions_news_is_told_and_its_close_ends_it() {
    let mut translator = open();
    // A second connection's setup is not news for the app.
    assert!(
        translator
            .inbound(server(json!({"setupComplete": {}})))
            .is_empty()
    );
    let skipped = translator.inbound(Inbound::news(ServerEvent::FrameSkipped {
        reason: "skipped a frame".into(),
    }));
    assert_eq!(wire(&skipped)[0]["payload"]["message"], "skipped a frame");
    let changes = [
        SessionChange::Reconnecting {
            planned: true,
            attempt: 0,
            reason: "The server asked.".into(),
            retry_in: std::time::Duration::ZERO,
        },
        SessionChange::Reconnected { resumed: true },
        SessionChange::Reconnected { resumed: false },
        SessionChange::TurnLost,
        SessionChange::ResumeRejected {
            message: "no".into(),
        },
        SessionChange::AnswerDropped {
            id: Some("c9".into()),
            name: "f".into(),
        },
    ];
    for change in changes {
        let out = translator.session_event(SessionEvent::Change(change));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind(), "LOG_MESSAGE");
    }
    let out = translator.session_event(SessionEvent::Abandoned(vec!["c3".into()]));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "TOOL_CALL_CANCELLATION", "payload": {"toolCallCancellation": {"ids": ["c3"]}}})
        ]
    );
    let close = CloseInfo {
        code: Some(1011),
        reason: "internal".into(),
        message: "The Live API closed the session.".into(),
        initiated_by_client: false,
    };
    // A call still open when the session ends for good is withdrawn before the end is told.
    translator.inbound(server(json!({"toolCall": {"functionCalls": [
        {"id": "c4", "name": "later", "args": {}}]}})));
    let out = translator.session_event(SessionEvent::Server(Inbound::news(ServerEvent::Closed(
        close,
    ))));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "TOOL_CALL_CANCELLATION", "payload": {"toolCallCancellation": {"ids": ["c4"]}}}),
            json!({"type": "GEMINI_ERROR", "payload": {"message": "The Live API closed the session.", "details": {"code": 1011, "reason": "internal"}}}),
            json!({"type": "GEMINI_DISCONNECTED", "payload": {"reason": "The Live API closed the session."}}),
        ]
    );
    assert!(!translator.is_open());
    // After the end, nothing more is said.
    assert!(
        translator
            .inbound(server(json!({"serverContent": {"turnComplete": true}})))
            .is_empty()
    );
    assert!(
        translator
            .session_event(SessionEvent::Change(SessionChange::TurnLost))
            .is_empty()
    );
}

#[test]
fn update_config_replaces_the_session_resuming_when_it_can() {
    let mut translator = open();
    let bad = translator.app(app(
        json!({"type": "UPDATE_CONFIG", "payload": {"model": "a b"}}),
    ));
    assert!(error_text(&bad).contains("goes on unchanged"));
    assert!(translator.is_open());
    let reply = translator.app(app(
        json!({"type": "UPDATE_CONFIG", "payload": {"model": "models/m", "odd": true}}),
    ));
    assert!(
        wire(&reply.to_app)[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("`odd`")
    );
    let Some(SessionStep::Reopen(mapped)) = reply.session else {
        panic!("{reply:?}")
    };
    let (note, resume) = translator.reopening(&mapped, Some("h1".into()));
    assert_eq!(resume.as_deref(), Some("h1"));
    assert!(
        wire(&[note])[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("conversation continues")
    );
    let (_, setup) = translator.opening(mapped, resume);
    assert_eq!(
        setup.session_resumption.unwrap().handle.as_deref(),
        Some("h1")
    );
    translator.opened();
    // The replacement is a new session for the app: its SETUP_COMPLETE is told.
    assert_eq!(
        translator
            .inbound(server(json!({"setupComplete": {}})))
            .len(),
        1
    );

    // Another model cannot resume; no handle cannot either.
    let other = LiveConfig {
        model: "models/other".into(),
        ..LiveConfig::default()
    }
    .to_setup()
    .unwrap();
    let (note, resume) = translator.reopening(&other, Some("h2".into()));
    assert_eq!(resume, None);
    assert!(
        wire(&[note])[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("model changed")
    );
    translator.opening(other.clone(), None);
    translator.opened();
    let (note, resume) = translator.reopening(&other, None);
    assert_eq!(resume, None);
    assert!(
        wire(&[note])[0]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("No session resumption handle")
    );
}

#[test]
fn disconnect_ends_the_session_with_a_farewell() {
    let mut translator = open();
    let reply = translator.app(AppMessage::DisconnectGemini);
    assert!(reply.to_app.is_empty());
    let Some(SessionStep::Disconnect { farewell }) = reply.session else {
        panic!("{reply:?}")
    };
    assert_eq!(
        wire(&[farewell]),
        [
            json!({"type": "GEMINI_DISCONNECTED", "payload": {"reason": "Disconnected at the client's request."}})
        ]
    );
    assert!(!translator.is_open());
}

/// A translator opened by `connect` (a `CONNECT_GEMINI` payload), set up; and the handle the
/// app asked to resume.
fn opened_with(connect: Value) -> (Translator, Option<String>) {
    let mut translator = Translator::new();
    let reply = translator.app(app(json!({"type": "CONNECT_GEMINI", "payload": connect})));
    let Some(SessionStep::Open { config, resume }) = reply.session else {
        panic!("{reply:?}")
    };
    let (_, setup) = translator.opening(config, resume.clone());
    assert_eq!(setup.session_resumption.unwrap().handle, resume);
    translator.opened();
    translator.inbound(server(json!({"setupComplete": {}})));
    (translator, resume)
}

#[test]
fn the_app_is_told_each_new_handle_once_unless_it_said_not_to() {
    let (mut translator, resume) = opened_with(json!({
        "initialConfig": {"model": "models/m"}, "handle": "from-another-instance"}));
    assert_eq!(resume.as_deref(), Some("from-another-instance"));
    let told = translator.handle_changed(Some("h1".into()));
    assert_eq!(
        wire(told.as_slice()),
        [json!({"type": "SESSION_HANDLE", "payload": {"handle": "h1"}})]
    );
    assert_eq!(translator.handle_changed(Some("h1".into())), None, "once");
    // A handle refused upstream: the app forgets its own.
    let told = translator.handle_changed(None);
    assert_eq!(
        wire(told.as_slice()),
        [json!({"type": "SESSION_HANDLE", "payload": {}})]
    );

    // The original bridge's dialect, byte for byte: no SESSION_HANDLE, no close code.
    let (mut original, _) = opened_with(json!({
        "initialConfig": {"model": "models/m"}, "sessionHandles": false}));
    assert_eq!(original.handle_changed(Some("h1".into())), None);
    let out = original.leaving(Some("h1".into()));
    assert_eq!(
        wire(&out),
        [json!({"type": "GEMINI_DISCONNECTED", "payload": {"reason": DRAINING}})]
    );
}

#[test]
fn leaving_for_a_drain_cancels_open_calls_then_tells_the_handle_and_the_close() {
    let (mut translator, _) = opened_with(json!({"initialConfig": {"model": "models/m"}}));
    translator.inbound(server(json!({"toolCall": {"functionCalls": [
        {"id": "b", "name": "f", "args": {}}, {"id": "a", "name": "f", "args": {}}]}})));
    assert!(translator.calls_pending());
    let out = translator.leaving(Some("h9".into()));
    assert_eq!(
        wire(&out),
        [
            json!({"type": "TOOL_CALL_CANCELLATION", "payload": {"toolCallCancellation": {"ids": ["a", "b"]}}}),
            json!({"type": "SESSION_HANDLE", "payload": {"handle": "h9"}}),
            json!({"type": "GEMINI_DISCONNECTED", "payload": {"reason": DRAINING, "code": 1012}}),
        ]
    );
    assert!(!translator.is_open());
    // The cancelled calls cannot be answered on a session that is gone.
    let reply = translator.app(app(json!({"type": "SEND_TOOL_RESPONSE", "payload": {
        "toolResponse": {"functionResponses": [{"id": "a", "name": "f", "response": {}}]}}})));
    assert!(error_text(&reply).contains("No Gemini session is open"));
}
