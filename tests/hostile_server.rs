//! A scripted fake Live server on loopback: malformed and unknown frames are skipped with a
//! warning and the conversation goes on; close codes become clear messages; the API key goes
//! only into the `x-goog-api-key` header and never into output, URLs or logs.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const SECRET: &str = "AIzaSy-test-secret-0123456789";

#[derive(Default, Debug)]
struct SeenRequest {
    uri: String,
    api_key_header: Option<String>,
}

enum Script {
    /// After the first user turn: garbage, an unknown message, truncated JSON, then a reply.
    HostileFramesThenReply,
    /// Close 1008 instead of setupComplete.
    RejectModel,
    /// Read the setup and never answer it.
    NeverSetUp,
}

async fn serve_once(script: Script) -> (String, Arc<Mutex<SeenRequest>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(SeenRequest::default()));
    let seen_by_server = seen.clone();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        #[allow(clippy::result_large_err)] // the callback type is fixed by tungstenite
        let record = |request: &Request, response: Response| {
            let mut seen = seen_by_server.lock().unwrap();
            seen.uri = request.uri().to_string();
            seen.api_key_header = request
                .headers()
                .get("x-goog-api-key")
                .map(|v| v.to_str().unwrap().to_owned());
            Ok(response)
        };
        let mut ws = tokio_tungstenite::accept_hdr_async(stream, record)
            .await
            .unwrap();
        let setup = ws.next().await.unwrap().unwrap();
        assert!(setup.to_text().unwrap().starts_with("{\"setup\":"));
        match script {
            Script::NeverSetUp => while let Some(Ok(_)) = ws.next().await {},
            Script::RejectModel => {
                let frame = CloseFrame {
                    code: CloseCode::Policy,
                    reason: "models/gemini-nope is not found for API version v1, or is not supported for bidiGenerateContent. Call ListModels".into(),
                };
                ws.send(Message::Close(Some(frame))).await.unwrap();
                while let Some(Ok(_)) = ws.next().await {}
            }
            Script::HostileFramesThenReply => {
                ws.send(Message::binary(b"{\n  \"setupComplete\": {}\n}\n".to_vec()))
                    .await
                    .unwrap();
                let turn = ws.next().await.unwrap().unwrap();
                assert!(turn.to_text().unwrap().contains("\"clientContent\""));
                for frame in [
                    Message::binary(vec![0xff, 0xfe, 0x00, 0x01]),
                    Message::text("{\"brandNewMessage\": {\"x\": 1}}"),
                    Message::text("{\"serverContent\": {\"modelTurn\": "),
                    Message::text(
                        "{\"serverContent\": {\"modelTurn\": {\"parts\": [{\"text\": \"Still here.\"}]}}}",
                    ),
                    Message::binary(b"{\"serverContent\": {\"turnComplete\": true}}".to_vec()),
                ] {
                    ws.send(frame).await.unwrap();
                }
                // Wait for the client's close, then answer it.
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_close() {
                        break;
                    }
                }
            }
        }
    });
    (url, seen)
}

fn run_headless(
    scratch: &std::path::Path,
    url: &str,
    input: &'static str,
) -> (Option<i32>, String, String) {
    let run = run_livetalk(
        scratch,
        &["--headless", "--endpoint", url],
        &[("GEMINI_API_KEY", SECRET)],
        &[input],
    );
    (run.code, run.stdout, run.stderr)
}

fn assert_no_secret_anywhere(scratch: &std::path::Path, texts: &[&str]) {
    for text in texts {
        assert!(!text.contains(SECRET), "the key leaked: {text}");
    }
    let log = scratch.join("data/livetalk/livetalk.log");
    let log =
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("log at {}: {e}", log.display()));
    assert!(!log.is_empty(), "the session was logged");
    assert!(!log.contains(SECRET), "the key leaked into the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_and_unknown_frames_are_skipped_and_the_conversation_continues() {
    let scratch = tempfile::tempdir().unwrap();
    let (url, seen) = serve_once(Script::HostileFramesThenReply).await;
    let path = scratch.path().to_path_buf();
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_headless(&path, &url, "hello"))
            .await
            .unwrap();

    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("You: hello\nGemini: Still here.\n"),
        "{stdout}"
    );
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("livetalk: warning: skipped"))
        .collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    assert!(warnings[0].contains("not UTF-8"), "{}", warnings[0]);
    assert!(
        warnings[1].contains("unknown server message (brandNewMessage)"),
        "{}",
        warnings[1]
    );
    assert!(warnings[2].contains("not valid JSON"), "{}", warnings[2]);

    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.api_key_header.as_deref(),
        Some(SECRET),
        "the key travels in the header"
    );
    assert!(
        !seen.uri.contains(SECRET) && !seen.uri.contains("key="),
        "never in the URL: {}",
        seen.uri
    );
    assert!(
        seen.uri
            .ends_with("/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent")
    );
    assert_no_secret_anywhere(scratch.path(), &[&stdout, &stderr]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_model_is_one_clear_message() {
    let scratch = tempfile::tempdir().unwrap();
    let (url, _seen) = serve_once(Script::RejectModel).await;
    let path = scratch.path().to_path_buf();
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_headless(&path, &url, "hello"))
            .await
            .unwrap();
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(
            "livetalk: error: The model is not available (1008): models/gemini-nope is not found"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Check `model` and `api_version`"),
        "{stderr}"
    );
    assert_no_secret_anywhere(scratch.path(), &[&stdout, &stderr]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_completes_setup_times_out_clearly() {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        "[session]\nsetup_timeout_secs = 1\n",
    )
    .unwrap();
    let (url, _seen) = serve_once(Script::NeverSetUp).await;
    let path = scratch.path().to_path_buf();
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_headless(&path, &url, "hello"))
            .await
            .unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("livetalk: error: No setupComplete from 127.0.0.1 within 1 s"),
        "{stderr}"
    );
}
