//! A typed turn whose reply needs a tool: the model calls a declared function, the example
//! answers the call, and the reply is read to `turnComplete`. Runs offline against the mock
//! Live server started in this process (no key, nothing but loopback).
//!
//! ```text
//! cargo run -p livetalk-live --example text_turn
//! ```

// An example talks to its reader on the terminal; there are no secrets to scrub.
#![allow(clippy::disallowed_macros)]

use std::process::ExitCode;
use std::time::Duration;

use livetalk_live::models::CURRENT_MODEL;
use livetalk_live::session::{self, ReconnectPolicy, SessionEvent};
use livetalk_live::wire::{
    FunctionCall, FunctionDeclaration, FunctionResponse, GenerationConfig, Modality, Setup, ToolSet,
};
use livetalk_live::{ApiVersion, Auth, ConnectOptions, Outbox, ServerEvent, connect};
use livetalk_mock::{MockOptions, MockServer};
use serde_json::{Value, json};

/// The longest wait for any one thing the server should do.
const WAIT: Duration = Duration::from_secs(10);
const QUESTION: &str = "Is the living room lamp on?";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("text_turn failed: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let mock = MockServer::start(MockOptions::loopback())
        .await
        .map_err(|e| format!("the mock server did not start: {e}"))?;
    println!("mock Live server on {}", mock.base_url());

    let options = ConnectOptions {
        endpoint: mock.endpoint(ApiVersion::V1),
        auth: Auth::None,
        setup: Setup {
            model: CURRENT_MODEL.to_owned(),
            generation_config: Some(GenerationConfig {
                response_modalities: vec![Modality::Text],
                ..GenerationConfig::default()
            }),
            tools: vec![ToolSet {
                function_declarations: vec![get_device_status()],
                ..ToolSet::default()
            }],
            ..Setup::default()
        },
        connect_timeout: WAIT,
    };
    // The first connection is made here, so a failure to connect is this call's error; from
    // then on the session reconnects on its own (it never needs to here).
    let connection = connect(options.clone())
        .await
        .map_err(|e| format!("could not connect: {e}"))?;
    let mut session = session::supervise(
        connection,
        Some(options.into()),
        ReconnectPolicy::default(),
        None,
    );

    println!("you: {QUESTION}");
    session
        .handle
        .send_user_text(QUESTION)
        .await
        .map_err(|e| format!("could not send the question: {e}"))?;

    let mut reply = String::new();
    let mut answered = 0;
    'reply: loop {
        let SessionEvent::Server(inbound) = next(&mut session.events, "the reply").await? else {
            continue;
        };
        for event in inbound {
            match event {
                ServerEvent::ToolCall(calls) => {
                    let answers: Vec<FunctionResponse> = calls.iter().map(answer).collect();
                    answered += answers.len();
                    session
                        .handle
                        .send_tool_responses(answers)
                        .await
                        .map_err(|e| format!("could not answer the tool call: {e}"))?;
                }
                ServerEvent::ModelText(text) => reply.push_str(&text),
                ServerEvent::OutputTranscription { text, .. } => reply.push_str(&text),
                ServerEvent::TurnComplete { .. } => break 'reply,
                ServerEvent::Closed(close) => {
                    return Err(format!(
                        "the session ended before the reply: {}",
                        close.message
                    ));
                }
                _ => {}
            }
        }
    }
    println!("model: {}", reply.trim());
    if answered == 0 {
        return Err("the model answered without calling get_device_status".to_owned());
    }
    if !reply.contains("off") {
        return Err(format!(
            "the reply does not use the tool's answer (the lamp is off): {reply:?}"
        ));
    }

    // A clean close: the server agrees, and the stream ends with a close we asked for.
    session.handle.close().await;
    loop {
        if let SessionEvent::Server(inbound) = next(&mut session.events, "the close").await?
            && let Some(close) = inbound.closed()
        {
            if !close.initiated_by_client {
                return Err(format!("the session ended badly: {}", close.message));
            }
            break;
        }
    }
    let figures = session.status.figures();
    println!(
        "closed cleanly: {} connection(s), {} message(s) sent, {answered} tool call(s) answered",
        figures.connections, figures.sent
    );
    Ok(())
}

/// `get_device_status`, as an app that controls a smart home would declare it.
fn get_device_status() -> FunctionDeclaration {
    FunctionDeclaration {
        name: "get_device_status".to_owned(),
        description: Some("Reads whether a device is on or off, and its settings.".to_owned()),
        parameters: Some(json!({
            "type": "OBJECT",
            "properties": {
                "device_name": {"type": "STRING", "description": "e.g. living room lamp"}
            },
            "required": ["device_name"]
        })),
        ..FunctionDeclaration::default()
    }
}

/// Runs a call against this example's one device (a lamp that is off) and answers it with the
/// call's own `id` and `name`, as the protocol asks.
fn answer(call: &FunctionCall) -> FunctionResponse {
    println!("tool call: {}({})", call.name, call.args);
    let response = match (call.name.as_str(), call.args.get("device_name")) {
        ("get_device_status", Some(Value::String(device))) => {
            json!({"device_name": device, "status": "off"})
        }
        _ => json!({"error": format!("{} is not a function this example runs", call.name)}),
    };
    println!("tool answer: {response}");
    FunctionResponse {
        id: call.id.clone(),
        name: call.name.clone(),
        response,
        ..FunctionResponse::default()
    }
}

/// The session's next event, or an error naming what was awaited.
async fn next(
    events: &mut tokio::sync::mpsc::Receiver<SessionEvent>,
    awaited: &str,
) -> Result<SessionEvent, String> {
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Some(event)) => Ok(event),
        Ok(None) => Err(format!(
            "the session's events ended while waiting for {awaited}"
        )),
        Err(_) => Err(format!(
            "nothing arrived within {} s while waiting for {awaited}",
            WAIT.as_secs()
        )),
    }
}
