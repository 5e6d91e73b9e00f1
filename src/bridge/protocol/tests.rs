//! Protocol types and the LiveConfig → setup mapping (`live_config`), against the shapes
//! docs/bridge-protocol.md documents.

use serde_json::{Value, json};

use super::*;
use crate::bridge::live_config::*;
use livetalk_live::wire::{
    AudioTranscriptionConfig, Behavior, FunctionCall, FunctionDeclaration, FunctionResponse,
    GenerationConfig, Modality, Scheduling, Setup, SpeechConfig, ToolSet,
};

fn decode(value: Value) -> Result<AppMessage, ProtocolError> {
    AppMessage::decode(value.to_string().as_bytes())
}

fn encoded(message: &BridgeMessage) -> Value {
    serde_json::from_str(&message.encode()).unwrap()
}

#[test]
fn connect_example_maps_onto_setup() {
    // A typical CONNECT_GEMINI, plus tools with defaultBehavior/defaultScheduling.
    let message = decode(json!({
        "type": "CONNECT_GEMINI",
        "payload": {"initialConfig": {
            "model": "models/gemini-3.8-live",
            "systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
            "generationConfig": {
                "responseModalities": ["audio"],
                "temperature": 0.4, "topK": 32, "topP": 0.9, "maxOutputTokens": 256,
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Aoede"}}}
            },
            "tools": [
                {"functionDeclarations": [
                    {"name": "getCurrentTime", "description": "Current time",
                     "defaultBehavior": "NON_BLOCKING", "defaultScheduling": "when_idle"},
                    {"name": "get_weather", "parameters": {"type": "OBJECT",
                        "properties": {"location": {"type": "STRING"}}},
                     "defaultBehavior": "blocking"}
                ]},
                {"googleSearch": {}}
            ],
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
        }}
    }))
    .unwrap();
    let AppMessage::ConnectGemini {
        config,
        ignored_keys,
        resume,
    } = message
    else {
        panic!("not a connect: {message:?}");
    };
    assert!(ignored_keys.is_empty());
    assert_eq!(
        resume,
        Resume::default(),
        "no handle; SESSION_HANDLE wanted"
    );
    let mapped = config.to_setup().unwrap();
    assert!(mapped.warnings.is_empty(), "{:?}", mapped.warnings);
    let setup = serde_json::to_value(&mapped.setup).unwrap();
    assert_eq!(
        setup,
        json!({
            "model": "models/gemini-3.8-live",
            "generationConfig": {
                "responseModalities": ["AUDIO"],
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Aoede"}}},
                "temperature": 0.4, "topP": 0.9, "topK": 32, "maxOutputTokens": 256
            },
            "systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
            "tools": [
                {"functionDeclarations": [
                    {"name": "getCurrentTime", "description": "Current time", "behavior": "NON_BLOCKING"},
                    {"name": "get_weather", "parameters": {"type": "OBJECT",
                        "properties": {"location": {"type": "STRING"}}}, "behavior": "BLOCKING"}
                ]},
                {"googleSearch": {}}
            ],
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
        })
    );
    assert_eq!(
        mapped.scheduling.get("getCurrentTime"),
        Some(&Scheduling::WhenIdle)
    );
    assert_eq!(mapped.scheduling.len(), 1);
}

#[test]
fn unsupported_config_fields_become_warnings_not_failures() {
    let (config, ignored) = LiveConfig::from_value(json!({
        "model": "gemini-3.8-live",
        "generationConfig": {"responseModalities": ["TEXT", "image"], "stopSequences": ["STOP"]},
        "tools": [{"functionDeclarations": [{"name": "f", "defaultScheduling": "SILENT"}]}],
        "sessionResumption": {}, "fancyNewThing": 1
    }))
    .unwrap();
    assert_eq!(ignored, ["fancyNewThing", "sessionResumption"]);
    let mapped = config.to_setup().unwrap();
    // A bare model id gets the prefix the service needs.
    assert_eq!(mapped.setup.model, "models/gemini-3.8-live");
    assert_eq!(
        mapped.setup.generation_config.unwrap().response_modalities,
        [Modality::Text]
    );
    assert_eq!(mapped.warnings.len(), 3, "{:?}", mapped.warnings);
    assert!(mapped.warnings[0].contains("\"image\""));
    assert!(mapped.warnings[1].contains("stopSequences"));
    assert!(mapped.warnings[2].contains("NON_BLOCKING"));
    assert!(mapped.scheduling.is_empty());
}

#[test]
fn unusable_configs_are_clear_errors() {
    let to_setup = |v: Value| LiveConfig::from_value(v).unwrap().0.to_setup();
    assert_eq!(to_setup(json!({})), Err(ConfigError::MissingModel));
    assert!(matches!(
        to_setup(json!({"model": "a b"})),
        Err(ConfigError::BadModel(_))
    ));
    let bad = to_setup(
        json!({"model": "m", "tools": [{"functionDeclarations": [{"name": "f", "defaultBehavior": "sometimes"}]}]}),
    )
    .unwrap_err();
    assert!(bad.to_string().contains("BLOCKING, NON_BLOCKING"), "{bad}");
    assert_eq!(
        to_setup(json!({"model": "m", "tools": [{"functionDeclarations": [{"name": " "}]}]})),
        Err(ConfigError::UnnamedFunction { index: 1 })
    );
    assert!(matches!(
        to_setup(json!({"model": "models/"})),
        Err(ConfigError::BadModel(_))
    ));
}

#[test]
fn what_the_live_api_would_refuse_is_refused_here_first() {
    let to_setup = |v: Value| LiveConfig::from_value(v).unwrap().0.to_setup();
    let with_generation = |g: Value| to_setup(json!({"model": "m", "generationConfig": g}));
    // The Live API does not answer with video; it was once passed on as VIDEO.
    let video = with_generation(json!({"responseModalities": ["video"]})).unwrap_err();
    assert_eq!(video, ConfigError::BadModality("video".into()));
    assert!(
        video.to_string().contains("\"audio\" or \"text\""),
        "{video}"
    );
    assert!(matches!(
        with_generation(json!({"responseModalities": ["speech"]})),
        Err(ConfigError::BadModality(_))
    ));
    assert_eq!(
        with_generation(json!({"responseModalities": ["audio", "TEXT"]})),
        Err(ConfigError::MixedModalities)
    );
    // The same modality twice is still one.
    let twice = with_generation(json!({"responseModalities": ["audio", "AUDIO"]})).unwrap();
    assert_eq!(
        twice.setup.generation_config.unwrap().response_modalities,
        [Modality::Audio]
    );

    let voice = |name: &str| {
        with_generation(
            json!({"speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": name}}}}),
        )
    };
    let unknown = voice("Robo").unwrap_err();
    assert_eq!(unknown, ConfigError::UnknownVoice("Robo".into()));
    assert!(unknown.to_string().contains("Puck"), "{unknown}");
    // Any casing; sent in the service's spelling.
    let speech = voice("kore").unwrap().setup.generation_config.unwrap();
    assert_eq!(
        speech
            .speech_config
            .unwrap()
            .voice_config
            .unwrap()
            .prebuilt_voice_config
            .unwrap()
            .voice_name,
        "Kore"
    );

    let tools = |tools: Value| to_setup(json!({"model": "m", "tools": tools}));
    assert_eq!(tools(json!([{}])), Err(ConfigError::EmptyTool { index: 0 }));
    assert_eq!(
        tools(json!([{"googleSearch": {}}, {"googleSearch": null}])),
        Err(ConfigError::EmptyTool { index: 1 })
    );
    assert_eq!(
        tools(json!([{"functionDeclarations": [{"name": "turn on"}]}])),
        Err(ConfigError::BadFunctionName("turn on".into()))
    );
    let long = "f".repeat(129);
    assert_eq!(
        tools(json!([{"functionDeclarations": [{"name": long}]}])),
        Err(ConfigError::BadFunctionName(long))
    );
    assert_eq!(
        tools(
            json!([{"functionDeclarations": [{"name": "f"}]}, {"functionDeclarations": [{"name": "f"}]}])
        ),
        Err(ConfigError::DuplicateFunction("f".into()))
    );
    assert!(tools(json!([{"functionDeclarations": [{"name": "ns:get_time.v2-b"}]}])).is_ok());
}

#[test]
fn unknown_tool_kinds_are_named_not_dropped() {
    let error = LiveConfig::from_value(json!({"model": "m", "tools": [
        {"googleSearch": {}},
        {"functionDeclarations": [{"name": "f"}], "urlContext": {}, "fileSearch": {}}
    ]}))
    .unwrap_err();
    assert_eq!(error.path, "tools[1]");
    assert!(
        error.message.contains("`urlContext`") && error.message.contains("`fileSearch`"),
        "{error}"
    );
    // In a message, the path is the app's.
    let message = AppMessage::decode(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "m", "tools": [{"urlContext": {}}]}}})
            .to_string()
            .as_bytes(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("at `initialConfig.tools[0]`") && message.contains("`urlContext`"),
        "{message}"
    );
    // Both spellings of the kinds the bridge knows are fine.
    assert!(
        LiveConfig::from_value(
            json!({"model": "m", "tools": [{"google_search": {}}, {"code_execution": {}}]})
        )
        .is_ok()
    );
}

#[test]
fn setup_round_trips_through_live_config() {
    let setup = Setup {
        model: "models/gemini-3.8-live".into(),
        generation_config: Some(GenerationConfig {
            response_modalities: vec![Modality::Audio],
            speech_config: Some(SpeechConfig::voice("Puck")),
            ..GenerationConfig::default()
        }),
        system_instruction: Some(livetalk_live::wire::Content::text("user", "Be brief.")),
        tools: vec![ToolSet {
            function_declarations: vec![FunctionDeclaration {
                name: "get_device_status".into(),
                description: Some("Reads a device".into()),
                parameters: Some(json!({"type": "OBJECT"})),
                behavior: Some(Behavior::NonBlocking),
                ..FunctionDeclaration::default()
            }],
            ..ToolSet::default()
        }],
        input_audio_transcription: Some(AudioTranscriptionConfig::default()),
        output_audio_transcription: Some(AudioTranscriptionConfig::default()),
        ..Setup::default()
    };
    let config = LiveConfig::from_setup(&setup);
    let wire = serde_json::to_value(&config).unwrap();
    // The protocol's lower-case modality on the bridge's wire.
    assert_eq!(
        wire["generationConfig"]["responseModalities"],
        json!(["audio"])
    );
    let (back, ignored) = LiveConfig::from_value(wire).unwrap();
    assert!(ignored.is_empty());
    assert_eq!(back.to_setup().unwrap().setup, setup);
}

#[test]
fn every_client_message_round_trips() {
    let messages = [
        AppMessage::ConnectGemini {
            config: LiveConfig {
                model: "models/m".into(),
                ..LiveConfig::default()
            },
            ignored_keys: Vec::new(),
            resume: Resume::default(),
        },
        AppMessage::ConnectGemini {
            config: LiveConfig {
                model: "models/m".into(),
                ..LiveConfig::default()
            },
            ignored_keys: Vec::new(),
            resume: Resume {
                handle: Some("h-1".into()),
                session_handles: false,
            },
        },
        AppMessage::SendMessage {
            parts: vec![Part {
                text: Some("Hello".into()),
                ..Part::default()
            }],
            turn_complete: false,
        },
        AppMessage::SendRealtimeInput(RealtimeInputPayload {
            input: RealtimeInput {
                audio: Some(Blob {
                    mime_type: "audio/pcm;rate=16000".into(),
                    data: vec![1, 0, 255, 127],
                }),
                ..RealtimeInput::default()
            },
            chunks: Vec::new(),
        }),
        AppMessage::SendToolResponse(ToolResponse {
            function_responses: vec![FunctionResponse {
                id: Some("function-call-123".into()),
                name: "getCurrentTime".into(),
                response: json!({"currentTime": "2024-06-01T12:34:56Z"}),
                ..FunctionResponse::default()
            }],
        }),
        AppMessage::UpdateConfig {
            config: LiveConfig {
                model: "models/m".into(),
                ..LiveConfig::default()
            },
            ignored_keys: Vec::new(),
        },
        AppMessage::DisconnectGemini,
        AppMessage::WebrtcOffer(WebrtcSdp { sdp: "v=0".into() }),
        AppMessage::WebrtcIceCandidate(IceCandidate {
            candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host".into(),
            sdp_mid: Some("0".into()),
            sdp_m_line_index: Some(0),
        }),
    ];
    for message in messages {
        let text = message.encode();
        assert_eq!(
            AppMessage::decode(text.as_bytes()).unwrap(),
            message,
            "{text}"
        );
    }
    assert_eq!(
        AppMessage::DisconnectGemini.encode(),
        r#"{"type":"DISCONNECT_GEMINI"}"#
    );
}

#[test]
fn tool_response_and_realtime_examples_decode() {
    let message = decode(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": [{"id": "call123", "name": "get_weather",
            "response": {"temperature": "15C", "condition": "Cloudy"}}]}}}),
    )
    .unwrap();
    let AppMessage::SendToolResponse(response) = message else {
        panic!("{message:?}")
    };
    assert_eq!(
        response.function_responses[0].id.as_deref(),
        Some("call123")
    );
    assert_eq!(
        response.function_responses[0].response["condition"],
        "Cloudy"
    );

    let message = decode(json!({"type": "SEND_REALTIME_INPUT", "payload": {
        "video": {"mimeType": "image/jpeg", "data": "/9j/4AAQ"}}}))
    .unwrap();
    let AppMessage::SendRealtimeInput(input) = message else {
        panic!("{message:?}")
    };
    assert_eq!(input.input.video.unwrap().mime_type, "image/jpeg");

    // Both deprecated spellings are recognised so the bridge can warn about them.
    for key in ["chunks", "mediaChunks", "media_chunks"] {
        let message = decode(json!({"type": "SEND_REALTIME_INPUT", "payload": {
            key: [{"mimeType": "audio/pcm;rate=16000", "data": "AAA="}, {"mimeType": "audio/pcm", "data": "AQA="}]}}))
        .unwrap();
        let AppMessage::SendRealtimeInput(input) = message else {
            panic!("{message:?}")
        };
        assert_eq!(
            input.chunks.len() + input.input.media_chunks.len(),
            2,
            "{key}"
        );
    }

    // SEND_MESSAGE defaults to a complete turn, like the SDKs.
    assert_eq!(
        decode(json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"text": "Hi"}]}})).unwrap(),
        AppMessage::SendMessage {
            parts: vec![Part {
                text: Some("Hi".into()),
                ..Part::default()
            }],
            turn_complete: true
        }
    );
}

#[test]
fn bad_client_messages_say_what_is_wrong() {
    let error = |frame: &str| {
        AppMessage::decode(frame.as_bytes())
            .unwrap_err()
            .to_string()
    };
    assert!(error("{not json").starts_with("The message is not valid JSON"));
    assert!(error("[1,2]").contains("string `type`"));
    assert!(error(r#"{"type": 7}"#).contains("string `type`"));
    let unknown = error(r#"{"type": "SEND_TEXT"}"#);
    assert!(
        unknown.contains("`SEND_TEXT`") && unknown.contains("SEND_MESSAGE"),
        "{unknown}"
    );
    assert!(error(r#"{"type": "SEND_MESSAGE"}"#).contains("SEND_MESSAGE needs a payload"));
    let shape = error(r#"{"type": "SEND_MESSAGE", "payload": {"parts": "hello"}}"#);
    assert!(
        shape.starts_with("SEND_MESSAGE payload is invalid: at `parts`"),
        "{shape}"
    );
    let nested = error(
        r#"{"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "m", "generationConfig": {"temperature": "hot"}}}}"#,
    );
    // (Fields reached through `#[serde(flatten)]` are reported at their parent's path.)
    assert!(
        nested.contains("at `initialConfig.generationConfig`") && nested.contains("\"hot\""),
        "{nested}"
    );
    let base64 = error(
        r#"{"type": "SEND_REALTIME_INPUT", "payload": {"audio": {"mimeType": "audio/pcm", "data": "***"}}}"#,
    );
    assert!(base64.contains("base64"), "{base64}");
    assert!(AppMessage::decode(&[0xff, 0xfe]).is_err());
}

#[test]
fn bridge_messages_have_the_documented_shapes() {
    // Every message has a payload: apps written for the original bridge drop those without.
    assert_eq!(
        encoded(&BridgeMessage::GeminiConnected {}),
        json!({"type": "GEMINI_CONNECTED", "payload": {}})
    );
    assert_eq!(
        encoded(&BridgeMessage::Interrupted {}),
        json!({"type": "INTERRUPTED", "payload": {}})
    );
    // Said flat and wrapped, for both kinds of app.
    assert_eq!(
        encoded(&BridgeMessage::SetupComplete(SetupCompleteDetails {
            success: true,
            error: None
        })),
        json!({"type": "SETUP_COMPLETE", "payload": {"setupComplete": {"success": true}, "success": true}})
    );
    assert_eq!(
        encoded(&BridgeMessage::AudioChunk {
            data: vec![1, 0, 2, 0]
        }),
        json!({"type": "AUDIO_CHUNK", "payload": {"data": "AQACAA=="}})
    );
    assert_eq!(
        encoded(&BridgeMessage::AssistantSpeaking { speaking: true }),
        json!({"type": "ASSISTANT_SPEAKING", "payload": {"speaking": true}})
    );
    assert_eq!(
        encoded(&BridgeMessage::TurnComplete(TurnCompleteDetails::default())),
        json!({"type": "TURN_COMPLETE", "payload": {}})
    );
    let log = encoded(&BridgeMessage::log(LogLevel::Warn, "careful"));
    let date = log["payload"]["date"].as_str().unwrap();
    assert!(date.parse::<jiff::Timestamp>().is_ok(), "{date}");
    assert_eq!(
        log,
        json!({"type": "LOG_MESSAGE", "payload": {"type": "warn", "message": "careful", "date": date}})
    );
    assert_eq!(
        encoded(&BridgeMessage::ImageGenerationResult(
            ImageGenerationResult {
                success: false,
                error: Some("no".into()),
                ..ImageGenerationResult::default()
            }
        )),
        json!({"type": "IMAGE_GENERATION_RESULT", "payload": {"success": false, "error": "no"}})
    );
    assert_eq!(
        encoded(&BridgeMessage::ToolCall {
            tool_call: ToolCall {
                function_calls: vec![FunctionCall {
                    id: Some("call123".into()),
                    name: "get_weather".into(),
                    args: json!({"location": "London"}),
                }]
            }
        }),
        json!({"type": "TOOL_CALL", "payload": {"toolCall": {"functionCalls": [
            {"id": "call123", "name": "get_weather", "args": {"location": "London"}}]}}})
    );
    assert_eq!(
        encoded(&BridgeMessage::ToolCallCancellation {
            tool_call_cancellation: ToolCallCancellation {
                ids: vec!["call123".into()]
            }
        }),
        json!({"type": "TOOL_CALL_CANCELLATION", "payload": {"toolCallCancellation": {"ids": ["call123"]}}})
    );
    assert_eq!(
        encoded(&BridgeMessage::GroundingMetadata {
            grounding_metadata: Some(json!({"searchEntryPoint": {"renderedContent": "<div/>"}}))
        }),
        json!({"type": "groundingMetadata", "payload": {"groundingMetadata": {"searchEntryPoint": {"renderedContent": "<div/>"}}}})
    );
    let content = BridgeMessage::content(
        ServerContent {
            output_transcription: Some(livetalk_live::wire::Transcription {
                text: Some("Hi".into()),
                ..Default::default()
            }),
            ..ServerContent::default()
        },
        Some(UsageMetadata {
            total_token_count: Some(5),
            ..UsageMetadata::default()
        }),
    );
    assert_eq!(
        encoded(&content),
        json!({"type": "CONTENT_MESSAGE", "payload": {"serverContent": {
            "outputTranscription": {"text": "Hi"}, "usageMetadata": {"totalTokenCount": 5}}}})
    );
}

#[test]
fn every_bridge_message_round_trips() {
    let messages = [
        BridgeMessage::GeminiConnected {},
        BridgeMessage::GeminiDisconnected {
            reason: Some("bye".into()),
            code: None,
        },
        BridgeMessage::GeminiDisconnected {
            reason: Some("draining".into()),
            code: Some(1012),
        },
        BridgeMessage::SessionHandle {
            handle: Some("h-2".into()),
        },
        BridgeMessage::SessionHandle { handle: None },
        BridgeMessage::GeminiError {
            message: "bad".into(),
            details: Some(json!({"code": 1011})),
        },
        BridgeMessage::SetupComplete(SetupCompleteDetails {
            success: false,
            error: Some(SetupErrorDetails {
                code: Some(1007),
                message: Some("invalid".into()),
                details: None,
            }),
        }),
        BridgeMessage::Interrupted {},
        BridgeMessage::TurnComplete(TurnCompleteDetails {
            reason: Some("NEED_MORE_INPUT".into()),
            waiting_for_input: Some(true),
            interaction_status: Some("IDLE".into()),
        }),
        BridgeMessage::AudioChunk {
            data: vec![9, 8, 7, 6],
        },
        BridgeMessage::AssistantSpeaking { speaking: true },
        BridgeMessage::log(LogLevel::Error, "oops"),
        BridgeMessage::GroundingMetadata {
            grounding_metadata: Some(json!({"x": 1})),
        },
        BridgeMessage::ImageGenerationResult(ImageGenerationResult {
            success: false,
            error: Some("none".into()),
            ..ImageGenerationResult::default()
        }),
        BridgeMessage::VoiceActivity {
            voice_activity: Some(livetalk_live::wire::VoiceActivity {
                activity_type: Some("ACTIVITY_START".into()),
                ..Default::default()
            }),
            voice_activity_detection_signal: None,
        },
        BridgeMessage::content(
            ServerContent {
                generation_complete: Some(true),
                ..ServerContent::default()
            },
            None,
        ),
    ];
    for message in messages {
        let text = message.encode();
        assert_eq!(
            BridgeMessage::decode(text.as_bytes()).unwrap(),
            message,
            "{text}"
        );
        assert_eq!(encoded(&message)["type"], message.kind(), "{text}");
    }
    // Types this client has no use for are recognised as such, not errors.
    assert_eq!(
        BridgeMessage::decode(br#"{"type": "WEBRTC_LATER", "payload": {"sdp": "v=0"}}"#).unwrap(),
        BridgeMessage::Other("WEBRTC_LATER".into())
    );
    // Payloads other bridges leave out, or send empty, or wrapped only.
    assert_eq!(
        BridgeMessage::decode(br#"{"type": "TURN_COMPLETE"}"#).unwrap(),
        BridgeMessage::TurnComplete(TurnCompleteDetails::default())
    );
    assert_eq!(
        BridgeMessage::decode(
            br#"{"type": "SETUP_COMPLETE", "payload": {"setupComplete": {"success": true}}}"#
        )
        .unwrap(),
        BridgeMessage::SetupComplete(SetupCompleteDetails {
            success: true,
            error: None
        })
    );
}

#[test]
fn null_is_absent_everywhere_but_in_the_apps_own_data() {
    // As the original bridge's Android app sends them: every optional field, as null.
    let connect = decode(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {
        "model": "models/gemini-3.8-live",
        "systemInstruction": {"role": null, "parts": [{"text": "Be helpful.", "inlineData": null}]},
        "generationConfig": {"responseModalities": ["audio"], "stopSequences": null,
            "temperature": null, "speechConfig": null},
        "tools": [{"functionDeclarations": [{"name": "show_card", "description": null,
            "parameters": {"type": "OBJECT", "properties": {"title": {"type": "STRING", "enum": null}}},
            "behavior": null}], "googleSearch": null}],
        "safetySettings": null
    }}}))
    .unwrap();
    let AppMessage::ConnectGemini {
        config,
        ignored_keys,
        ..
    } = connect
    else {
        panic!("{connect:?}")
    };
    assert!(ignored_keys.is_empty(), "{ignored_keys:?}");
    let setup = config.to_setup().unwrap().setup;
    assert_eq!(setup.tools[0].function_declarations[0].name, "show_card");
    let realtime = decode(json!({"type": "SEND_REALTIME_INPUT", "payload": {
        "audio": null, "video": null, "text": "hello", "chunks": null, "mediaChunks": null,
        "activityStart": null, "activityEnd": null, "audioStreamEnd": null}}))
    .unwrap();
    let AppMessage::SendRealtimeInput(input) = realtime else {
        panic!("{realtime:?}")
    };
    assert_eq!(input.input.text.as_deref(), Some("hello"));
    // A null inside a tool result is the app's value and goes on as it is.
    let response = decode(
        json!({"type": "SEND_TOOL_RESPONSE", "payload": {"toolResponse": {
        "functionResponses": [{"id": "c1", "name": "f", "response": {"value": null},
            "willContinue": null, "scheduling": null}]}}}),
    )
    .unwrap();
    let AppMessage::SendToolResponse(response) = response else {
        panic!("{response:?}")
    };
    assert_eq!(
        response.function_responses[0].response,
        json!({"value": null})
    );
    let message = decode(json!({"type": "SEND_MESSAGE", "payload": {"parts": [{"text": "hi"}], "turnComplete": null}})).unwrap();
    assert_eq!(
        message,
        AppMessage::SendMessage {
            parts: vec![livetalk_live::wire::Part {
                text: Some("hi".into()),
                ..Default::default()
            }],
            turn_complete: true
        }
    );
    assert_eq!(
        decode(json!({"type": "GENERATE_IMAGE", "payload": {"text": "a cat", "imageData": null}}))
            .unwrap(),
        AppMessage::GenerateImage
    );
}

#[test]
fn a_retired_model_is_replaced_by_the_current_one_with_a_warning() {
    let config = LiveConfig {
        model: "models/gemini-live-2.5-flash-preview".into(),
        ..LiveConfig::default()
    };
    let mapped = config.to_setup().unwrap();
    assert_eq!(mapped.setup.model, livetalk_live::models::CURRENT_MODEL);
    assert!(
        mapped.warnings[0].contains("gemini-live-2.5-flash-preview has been retired"),
        "{:?}",
        mapped.warnings
    );
}

/// One message of every type each way.
fn every_app_message() -> Vec<AppMessage> {
    let config = LiveConfig {
        model: "models/m".into(),
        ..LiveConfig::default()
    };
    vec![
        AppMessage::ConnectGemini {
            config: config.clone(),
            ignored_keys: Vec::new(),
            resume: Resume::default(),
        },
        AppMessage::SendMessage {
            parts: Vec::new(),
            turn_complete: true,
        },
        AppMessage::SendRealtimeInput(RealtimeInputPayload::default()),
        AppMessage::SendToolResponse(ToolResponse::default()),
        AppMessage::UpdateConfig {
            config,
            ignored_keys: Vec::new(),
        },
        AppMessage::DisconnectGemini,
        AppMessage::WebrtcOffer(WebrtcSdp::default()),
        AppMessage::WebrtcIceCandidate(IceCandidate::default()),
        AppMessage::GenerateImage,
        AppMessage::ContextUpdate(ContextUpdate::default()),
    ]
}

fn every_bridge_message() -> Vec<BridgeMessage> {
    vec![
        BridgeMessage::GeminiConnected {},
        BridgeMessage::GeminiDisconnected {
            reason: None,
            code: None,
        },
        BridgeMessage::error("e"),
        BridgeMessage::content(ServerContent::default(), None),
        BridgeMessage::ToolCall {
            tool_call: ToolCall::default(),
        },
        BridgeMessage::ToolCallCancellation {
            tool_call_cancellation: ToolCallCancellation::default(),
        },
        BridgeMessage::SetupComplete(SetupCompleteDetails::default()),
        BridgeMessage::Interrupted {},
        BridgeMessage::TurnComplete(TurnCompleteDetails::default()),
        BridgeMessage::AudioChunk { data: Vec::new() },
        BridgeMessage::log(LogLevel::Info, "i"),
        BridgeMessage::AssistantSpeaking { speaking: true },
        BridgeMessage::GroundingMetadata {
            grounding_metadata: None,
        },
        BridgeMessage::ImageGenerationResult(ImageGenerationResult::default()),
        BridgeMessage::VoiceActivity {
            voice_activity: None,
            voice_activity_detection_signal: None,
        },
        BridgeMessage::WebrtcAnswer(WebrtcSdp::default()),
        BridgeMessage::SessionHandle { handle: None },
    ]
}

#[test]
fn ice_candidates_are_read_flat_and_nested() {
    let expected = AppMessage::WebrtcIceCandidate(IceCandidate {
        candidate: "candidate:1 1 udp 2130706431 127.0.0.1 50000 typ host".into(),
        sdp_mid: Some("0".into()),
        sdp_m_line_index: Some(0),
    });
    let line = "candidate:1 1 udp 2130706431 127.0.0.1 50000 typ host";
    // The documented flat shape.
    let flat = json!({"type": "WEBRTC_ICE_CANDIDATE",
        "payload": {"candidate": line, "sdpMid": "0", "sdpMLineIndex": 0}});
    assert_eq!(decode(flat).unwrap(), expected);
    // The original bridge's Android app nests the browser's RTCIceCandidateInit.
    let nested = json!({"type": "WEBRTC_ICE_CANDIDATE",
        "payload": {"candidate": {"candidate": line, "sdpMid": "0", "sdpMLineIndex": 0}}});
    assert_eq!(decode(nested).unwrap(), expected);
    // With its explicit nulls, and an offer with its `type`.
    let android = json!({"type": "WEBRTC_ICE_CANDIDATE",
        "payload": {"candidate": {"candidate": line, "sdpMid": "0", "sdpMLineIndex": 0, "usernameFragment": null}}});
    assert_eq!(decode(android).unwrap(), expected);
    assert_eq!(
        decode(json!({"type": "WEBRTC_OFFER", "payload": {"type": "offer", "sdp": "v=0"}}))
            .unwrap(),
        AppMessage::WebrtcOffer(WebrtcSdp { sdp: "v=0".into() })
    );
    // Shapes that are neither say so.
    for payload in [
        json!({"candidate": 5}),
        json!({}),
        json!({"candidate": {"sdpMid": "0"}}),
    ] {
        let error = decode(json!({"type": "WEBRTC_ICE_CANDIDATE", "payload": payload}))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("WEBRTC_ICE_CANDIDATE payload is invalid"),
            "{error}"
        );
    }
    let error = decode(json!({"type": "WEBRTC_OFFER"}))
        .unwrap_err()
        .to_string();
    assert!(error.contains("{\"sdp\": string}"), "{error}");
}

#[test]
fn each_kind_is_serdes_tag_and_the_type_lists_are_serdes() {
    let app = every_app_message();
    let app_kinds: Vec<&str> = app.iter().map(AppMessage::kind).collect();
    assert_eq!(AppMessage::types(), app_kinds.as_slice());
    for message in &app {
        let wire: Value = serde_json::from_str(&message.encode()).unwrap();
        assert_eq!(wire["type"], message.kind());
    }
    let bridge = every_bridge_message();
    let bridge_kinds: Vec<&str> = bridge.iter().map(BridgeMessage::kind).collect();
    assert_eq!(BridgeMessage::types(), bridge_kinds.as_slice());
    for message in &bridge {
        assert_eq!(encoded(message)["type"], message.kind());
        assert_eq!(
            &BridgeMessage::decode(message.encode().as_bytes()).unwrap(),
            message
        );
    }
    // The unknown type's answer lists them all.
    let unknown = AppMessage::decode(br#"{"type": "SEND_TEXT"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        unknown.ends_with(&format!("Known types: {}.", app_kinds.join(", "))),
        "{unknown}"
    );
}

#[test]
fn a_type_without_its_payload_is_told_what_it_needs() {
    for kind in AppMessage::types() {
        match AppMessage::decode(json!({ "type": kind }).to_string().as_bytes()) {
            // The types that need nothing take whatever payload they get, and none.
            Ok(message) => {
                assert_eq!(message.kind(), *kind);
                let with = json!({ "type": kind, "payload": {"sdp": "", "text": "a cat"} });
                assert_eq!(decode(with).unwrap(), message);
            }
            Err(error) => {
                let ProtocolError::MissingPayload { expected, .. } = &error else {
                    panic!("{kind}: {error}");
                };
                assert!(
                    expected.starts_with('{') || expected.starts_with("a "),
                    "{kind}: {error}"
                );
            }
        }
    }
}

#[test]
fn unknown_config_keys_are_found_in_both_config_messages() {
    let connect = decode(
        json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "m", "extra": 1}}}),
    )
    .unwrap();
    assert!(
        matches!(connect, AppMessage::ConnectGemini { ignored_keys, .. } if ignored_keys == ["extra"])
    );
    let update =
        decode(json!({"type": "UPDATE_CONFIG", "payload": {"model": "m", "more": 1}})).unwrap();
    assert!(
        matches!(update, AppMessage::UpdateConfig { ignored_keys, .. } if ignored_keys == ["more"])
    );
    let error = decode(
        json!({"type": "UPDATE_CONFIG", "payload": {"model": "m", "tools": [{"urlContext": {}}]}}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("UPDATE_CONFIG payload is invalid: at `tools[0]`"),
        "{error}"
    );
    let typed = decode(json!({"type": "UPDATE_CONFIG", "payload": {"model": 5}}))
        .unwrap_err()
        .to_string();
    assert!(
        typed.starts_with("UPDATE_CONFIG payload is invalid: at `model`"),
        "{typed}"
    );
}
