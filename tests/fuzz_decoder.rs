//! Property-based fuzzing of the frame decoders: the client's server-message decoder (and the
//! events made from what it accepts) and the mock's client-message decoder must never panic,
//! whatever bytes arrive. Inputs are random bytes, random JSON built from the protocol's own
//! field names (so the decoders get deep into the wire types), and mutated real frames.
//!
//! The run is bounded for CI (about 830,000 inputs, about a minute in a debug build);
//! `LIVETALK_FUZZ_CASES=3000000 cargo nextest run --test fuzz_decoder` runs ten times longer
//! by hand (the number is the case count of the largest property; the others scale with it).
//! Crashes found become the regression tests at the end of this file.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

use livetalk_live::codec::{
    DecodedServerFrame, decode_client, decode_server, encode_client, encode_server,
};
use livetalk_live::events::events_from;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value};

/// Field names of the Live API in both spellings, plus a few strangers.
const KEYS: &[&str] = &[
    "setupComplete",
    "sessionId",
    "serverContent",
    "server_content",
    "modelTurn",
    "model_turn",
    "parts",
    "text",
    "thought",
    "inlineData",
    "inline_data",
    "mimeType",
    "mime_type",
    "data",
    "role",
    "turnComplete",
    "turn_complete",
    "generationComplete",
    "interrupted",
    "turnCompleteReason",
    "waitingForInput",
    "inputTranscription",
    "outputTranscription",
    "finished",
    "groundingMetadata",
    "toolCall",
    "tool_call",
    "functionCalls",
    "function_calls",
    "id",
    "name",
    "args",
    "toolCallCancellation",
    "ids",
    "goAway",
    "go_away",
    "timeLeft",
    "time_left",
    "sessionResumptionUpdate",
    "newHandle",
    "resumable",
    "lastConsumedClientMessageIndex",
    "usageMetadata",
    "promptTokenCount",
    "totalTokenCount",
    "responseTokensDetails",
    "modality",
    "tokenCount",
    "voiceActivity",
    "type",
    "voiceActivityDetectionSignal",
    "vadSignalType",
    "setup",
    "model",
    "generationConfig",
    "responseModalities",
    "speechConfig",
    "tools",
    "functionDeclarations",
    "sessionResumption",
    "handle",
    "contextWindowCompression",
    "slidingWindow",
    "targetTokens",
    "triggerTokens",
    "clientContent",
    "client_content",
    "turns",
    "realtimeInput",
    "realtime_input",
    "audio",
    "audioStreamEnd",
    "mediaChunks",
    "media_chunks",
    "activityStart",
    "toolResponse",
    "tool_response",
    "functionResponses",
    "response",
    "scheduling",
    "willContinue",
    "",
    "\u{0}",
    "ünïcödé",
];

/// Strings that mean something to some field: durations, rates, enums, base64, numbers.
const WORDS: &[&str] = &[
    "audio/pcm;rate=24000",
    "audio/pcm;rate=0",
    "audio/pcm;rate=99999999999999999999",
    "audio/pcm",
    "text/plain",
    "AQACAA==",
    "AQACAA",
    "-_-_",
    "!!!!",
    "true",
    "false",
    "TRUE",
    "50s",
    "9.5s",
    "0.250s",
    "-1s",
    "s",
    "NaNs",
    "infs",
    "18446744073709551616s",
    "ACTIVITY_START",
    "ACTIVITY_END",
    "VAD_SIGNAL_TYPE_SOS",
    "AUDIO",
    "TEXT",
    "SILENT",
    "WHEN_IDLE",
    "INTERRUPT",
    "NON_BLOCKING",
    "123456789",
    "-9223372036854775809",
    "1e400",
    "models/gemini-3.8-live",
    "function-call-1",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(WORDS).prop_map(|w| Value::String(w.to_owned())),
        // Duration-like and number-like strings, the way a fuzzer finds overflows.
        "-?[0-9]{0,24}(\\.[0-9]{0,4})?(e-?[0-9]{1,3})?s?".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// A top-level object whose keys are message names, so the typed decoders engage.
fn message_json() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec((prop::sample::select(KEYS), json_value()), 0..4).prop_map(|pairs| {
        let object: Map<String, Value> =
            pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        serde_json::to_vec(&Value::Object(object)).unwrap()
    })
}

/// Real frames edited as JSON rather than as bytes: a value replaced by another, a key or an
/// item dropped, a key added. Still JSON, and still mostly the message it was, so most of them
/// decode and the round trip has something to hold; mutated bytes mostly do not parse.
fn edited_golden() -> impl Strategy<Value = Vec<u8>> {
    let edit = (
        any::<usize>(),
        0u8..3,
        prop::sample::select(KEYS),
        json_value(),
    );
    (
        prop::sample::select(GOLDEN),
        prop::collection::vec(edit, 1..4),
    )
        .prop_map(|(frame, edits)| {
            let mut value: Value = serde_json::from_str(frame).unwrap();
            for (at, kind, key, new) in edits {
                edit_json(&mut value, at, kind, key, new);
            }
            serde_json::to_vec(&value).unwrap()
        })
}

/// One edit of `value` at its `at`-th node (depth first, counted round): `kind` 0 puts `new`
/// in its place, 1 drops it, 2 adds `key` (with `new`) to it when it is an object.
fn edit_json(value: &mut Value, at: usize, kind: u8, key: &str, new: Value) {
    fn paths(value: &Value, here: String, all: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    paths(
                        v,
                        format!("{here}/{}", k.replace('~', "~0").replace('/', "~1")),
                        all,
                    );
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    paths(v, format!("{here}/{i}"), all);
                }
            }
            _ => {}
        }
        all.push(here);
    }
    let mut all = Vec::new();
    paths(value, String::new(), &mut all);
    let path = &all[at % all.len()];
    match kind {
        0 => {
            if let Some(node) = value.pointer_mut(path) {
                *node = new;
            }
        }
        1 => {
            let Some((parent, last)) = path.rsplit_once('/') else {
                return;
            };
            match value.pointer_mut(parent) {
                Some(Value::Object(map)) => {
                    map.remove(&last.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(items)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        items.remove(i);
                    }
                }
                _ => {}
            }
        }
        _ => {
            if let Some(Value::Object(map)) = value.pointer_mut(path) {
                map.insert(key.to_owned(), new);
            }
        }
    }
}

/// The least share of each round trip's inputs that must decode: about half of what did
/// (36 %, 3.1 %, 0.9 %, 1.8 %, 44 % and 18 % in a run of the defaults), so a decoder or a
/// generator that stopped reaching the messages fails here instead of round-tripping nothing.
const LEAST_SERVER_JSON: f64 = 0.18;
const LEAST_SERVER_MUTATED: f64 = 0.015;
const LEAST_CLIENT_JSON: f64 = 0.004;
const LEAST_CLIENT_MUTATED: f64 = 0.009;
const LEAST_SERVER_EDITED: f64 = 0.22;
const LEAST_CLIENT_EDITED: f64 = 0.09;

/// Real frames of both directions, as the service and the SDKs send them.
const GOLDEN: &[&str] = &[
    "{\n  \"setupComplete\": {}\n}\n",
    // Model audio as the service sends it (pretty, in a binary frame), and as the Python SDK
    // spells it: the shape the decoder's fast path takes, and its neighbours.
    "{\n  \"serverContent\": {\n    \"modelTurn\": {\n      \"parts\": [\n        {\n          \"inlineData\": {\n            \"mimeType\": \"audio/pcm;rate=24000\",\n            \"data\": \"AQACAP//+/8=\"\n          }\n        }\n      ]\n    }\n  }\n}\n",
    r#"{"server_content": {"model_turn": {"role": "model", "parts": [{"inline_data": {"mime_type": "audio/pcm", "data": "AQACAP__-_8"}}]}}}"#,
    r#"{"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": "AQACAP//+/8="}}}"#,
    r#"{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQACAA=="}}, {"text": "thinking", "thought": true}]}, "outputTranscription": {"text": "Hi"}, "generationComplete": true, "turnComplete": true}, "usageMetadata": {"totalTokenCount": 5, "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": "25"}]}}"#,
    r#"{"toolCall": {"functionCalls": [{"id": "function-call-1", "name": "get_device_status", "args": {"device_name": "living room lamp"}}]}}"#,
    r#"{"toolCallCancellation": {"ids": ["function-call-1"]}}"#,
    r#"{"goAway": {"timeLeft": "9.5s"}}"#,
    r#"{"sessionResumptionUpdate": {"newHandle": "abc", "resumable": "true", "lastConsumedClientMessageIndex": "123456789"}}"#,
    r#"{"voiceActivityDetectionSignal": {"vadSignalType": "VAD_SIGNAL_TYPE_SOS"}}"#,
    r#"{"setup": {"model": "models/gemini-3.8-live", "generationConfig": {"responseModalities": ["AUDIO"]}, "sessionResumption": {"handle": "abc"}, "contextWindowCompression": {"triggerTokens": "25600", "slidingWindow": {"targetTokens": 12800}}}}"#,
    r#"{"realtime_input": {"media_chunks": [{"mime_type": "audio/pcm;rate=16000", "data": "AQID-_8="}]}}"#,
    r#"{"tool_response": {"function_responses": [{"id": "function-call-1", "name": "get_current_time", "response": {"ok": true}, "scheduling": "SILENT"}]}}"#,
    r#"{"clientContent": {"turns": [{"role": "user", "parts": [{"text": "hello"}]}], "turnComplete": true}}"#,
];

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    Duplicate(usize, usize),
}

fn mutated_golden() -> impl Strategy<Value = Vec<u8>> {
    let edit = prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Duplicate(a, b)),
    ];
    (
        prop::sample::select(GOLDEN),
        prop::collection::vec(edit, 1..6),
    )
        .prop_map(|(frame, edits)| {
            let mut bytes = frame.as_bytes().to_vec();
            for edit in edits {
                let len = bytes.len().max(1);
                match edit {
                    Edit::Flip(i, b) if !bytes.is_empty() => bytes[i % len] ^= b,
                    Edit::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), b),
                    Edit::Delete(i) if !bytes.is_empty() => {
                        bytes.remove(i % len);
                    }
                    Edit::Truncate(i) => bytes.truncate(i % len),
                    Edit::Duplicate(a, b) if !bytes.is_empty() => {
                        let (from, to) = ((a % len).min(b % len), (a % len).max(b % len));
                        let slice = bytes[from..to].to_vec();
                        bytes.splice(to..to, slice);
                    }
                    _ => {}
                }
            }
            bytes
        })
}

/// Everything the client does with a frame before the app sees it. Each reader says whether
/// the input decoded, so a run can tell how much of it reached past the decoder.
fn client_reads(payload: &[u8]) -> bool {
    let Ok(DecodedServerFrame::Message(message)) = decode_server(payload) else {
        return false;
    };
    // Formatting is what the log and the notices do with it.
    let _ = format!("{message:?}");
    for event in events_from(message) {
        let _ = format!("{event:?}");
    }
    true
}

/// Decode → encode → decode gives the message back: nothing the client reads is lost or changed
/// by the way it is written (the mock and the recorder write what they read).
fn server_round_trip(payload: &[u8]) -> bool {
    let Ok(DecodedServerFrame::Message(message)) = decode_server(payload) else {
        return false;
    };
    let written = encode_server(&message);
    assert_eq!(
        decode_server(&written),
        Ok(DecodedServerFrame::Message(message)),
        "written as {}",
        String::from_utf8_lossy(&written)
    );
    true
}

/// The same for client messages, through the fast mic path where it applies.
fn client_round_trip(payload: &[u8]) -> bool {
    let Ok(message) = decode_client(payload) else {
        return false;
    };
    let written = encode_client(&message);
    assert_eq!(
        decode_client(written.as_bytes()),
        Ok(message),
        "written as {written}"
    );
    true
}

fn mock_reads(payload: &[u8]) -> bool {
    let Ok(message) = decode_client(payload) else {
        return false;
    };
    let _ = format!("{message:?}");
    true
}

/// The CI default, or scaled so the largest property runs `LIVETALK_FUZZ_CASES` cases.
fn cases(default: u32) -> u32 {
    std::env::var("LIVETALK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|wanted| (u64::from(default) * wanted / 300_000).clamp(1, u64::from(u32::MAX)) as u32)
        .unwrap_or(default)
}

/// A failing input, shown as text so it can be pasted into a regression test.
struct Shown(Vec<u8>);

impl std::fmt::Debug for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// Runs `read` on the strategy's inputs; the share of them that decoded.
fn run<S: Strategy<Value = Vec<u8>>>(
    strategy: S,
    default_cases: u32,
    read: fn(&[u8]) -> bool,
) -> f64 {
    let strategy = strategy.prop_map(Shown);
    let mut runner = TestRunner::new(Config {
        cases: cases(default_cases),
        failure_persistence: None,
        ..Config::default()
    });
    let started = std::time::Instant::now();
    let decoded = std::cell::Cell::new(0u64);
    let tried = std::cell::Cell::new(0u64);
    runner
        .run(&strategy, |payload| {
            tried.set(tried.get() + 1);
            if read(&payload.0) {
                decoded.set(decoded.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    let share = decoded.get() as f64 / tried.get().max(1) as f64;
    eprintln!(
        "{} cases in {:.1} s, {:.1} % of them decoded",
        cases(default_cases),
        started.elapsed().as_secs_f64(),
        share * 100.0
    );
    share
}

/// Runs a round trip and holds that at least `least` of its inputs decoded: a round trip
/// over inputs that all fail to decode would pass while checking nothing.
fn round_trip<S: Strategy<Value = Vec<u8>>>(
    what: &str,
    strategy: S,
    default_cases: u32,
    trip: fn(&[u8]) -> bool,
    least: f64,
) {
    let share = run(strategy, default_cases, trip);
    assert!(
        share >= least,
        "{what}: only {:.1} % of the inputs decoded (at least {:.0} % must, or the round trip checks little)",
        share * 100.0,
        least * 100.0
    );
}

#[test]
fn server_decoder_survives_random_bytes() {
    run(
        prop::collection::vec(any::<u8>(), 0..2048),
        60_000,
        client_reads,
    );
}

#[test]
fn server_decoder_survives_protocol_shaped_json() {
    run(message_json(), 150_000, client_reads);
}

#[test]
fn server_decoder_survives_mutated_real_frames() {
    run(mutated_golden(), 300_000, client_reads);
}

#[test]
fn client_decoder_survives_random_input() {
    run(
        prop::collection::vec(any::<u8>(), 0..2048),
        30_000,
        mock_reads,
    );
    run(message_json(), 80_000, mock_reads);
    run(mutated_golden(), 150_000, mock_reads);
}

#[test]
fn what_is_read_is_written_back_unchanged() {
    round_trip(
        "server, protocol-shaped JSON",
        message_json(),
        40_000,
        server_round_trip,
        LEAST_SERVER_JSON,
    );
    round_trip(
        "server, mutated frames",
        mutated_golden(),
        60_000,
        server_round_trip,
        LEAST_SERVER_MUTATED,
    );
    round_trip(
        "client, protocol-shaped JSON",
        message_json(),
        20_000,
        client_round_trip,
        LEAST_CLIENT_JSON,
    );
    round_trip(
        "client, mutated frames",
        mutated_golden(),
        30_000,
        client_round_trip,
        LEAST_CLIENT_MUTATED,
    );
    round_trip(
        "server, edited frames",
        edited_golden(),
        15_000,
        server_round_trip,
        LEAST_SERVER_EDITED,
    );
    round_trip(
        "client, edited frames",
        edited_golden(),
        15_000,
        client_round_trip,
        LEAST_CLIENT_EDITED,
    );
}

/// Crashes the fuzzer found, kept as fixed inputs.
#[test]
fn regressions() {
    for frame in [
        // A duration too big for `Duration::from_secs_f64` panicked in `parse_duration`
        // (a struct also decodes from a JSON array, so this is a goAway with that timeLeft).
        r#"{"goAway":["20000000000000000000"]}"#,
        r#"{"goAway": {"timeLeft": "1e300s"}}"#,
        r#"{"goAway": {"timeLeft": "18446744073709551616s"}}"#,
    ] {
        client_reads(frame.as_bytes());
        mock_reads(frame.as_bytes());
        // An impossible duration loses that field, not the goAway.
        match decode_server(frame.as_bytes()) {
            Ok(DecodedServerFrame::Message(message)) => {
                assert_eq!(message.go_away.map(|g| g.time_left), Some(None), "{frame}")
            }
            other => panic!("{frame}: {other:?}"),
        }
    }
}
