//! Text from others never reaches a terminal raw: a server's model text, a recording's user
//! text, a scenario's turn and a model id holding a clipboard write (`ESC ] 52`), a screen
//! clear (`ESC [ 2 J`), the C1 CSI (U+009B), BEL and DEL are shown escaped (`\x1b`) in headless
//! output, `replay --headless`, `inspect` (text, `--markdown`, `--json`), `check` and
//! `doctor`, on a pipe as on a terminal; `--json` lines escape C1 and DEL as JSON escapes and
//! still read back as the same text.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use common::*;

/// What a hostile peer puts in its text: a clipboard write, a screen clear, CSI as one C1
/// character, BEL and DEL.
const HOSTILE: &str = "Sure\u{1b}]52;c;aGFja2Vk\u{7}\u{1b}[2J\u{9b}31m\u{7f}!";

/// Whether `text` holds anything a terminal acts on (C0 but tab and newline, DEL, C1).
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}'))
        .collect()
}

fn assert_safe(what: &str, text: &str) {
    let raw = raw_controls(text);
    assert!(raw.is_empty(), "{what} sent {raw:?} raw:\n{text:?}");
    assert!(
        text.contains("\\x1b]52;c;aGFja2Vk\\x07\\x1b[2J\\x9b31m\\x7f"),
        "{what} shows the hostile text escaped:\n{text}"
    );
}

/// A Live server that answers every turn with [`HOSTILE`] text, for as many connections as
/// come.
fn hostile_server(runtime: &tokio::runtime::Runtime) -> String {
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let _setup = ws.next().await;
                let ready = json!({"setupComplete": {}}).to_string();
                let _ = ws.send(Message::text(ready)).await;
                while let Some(Ok(frame)) = ws.next().await {
                    if !frame.to_text().is_ok_and(|t| t.contains("clientContent")) {
                        continue;
                    }
                    for reply in [
                        json!({"serverContent": {"modelTurn": {"parts": [{"text": HOSTILE}]}}}),
                        json!({"serverContent": {"turnComplete": true}}),
                    ] {
                        let _ = ws.send(Message::text(reply.to_string())).await;
                    }
                }
            });
        }
    });
    url
}

#[test]
fn text_from_others_is_shown_escaped_in_every_output() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = hostile_server(&runtime);
    let scratch = tempfile::tempdir().unwrap();
    let rec = scratch.path().join("rec");
    let key = ("GEMINI_API_KEY", "fake-key-for-a-local-server");
    let typed = "Say \u{1b}]52;c;aGFja2Vk\u{7}\u{1b}[2J\u{9b}31m\u{7f}!";

    // Headless, recorded; the user's own line comes back escaped as well.
    let run = run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--endpoint",
            &url,
            "--record",
            rec.to_str().unwrap(),
        ],
        &[key],
        &[typed],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_safe("headless", &run.stdout);
    assert!(raw_controls(&run.stderr).is_empty(), "{:?}", run.stderr);

    // --json: C1 and DEL as JSON escapes; each line reads back as the text that was sent.
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--json", "--endpoint", &url],
        &[key],
        &["Hello."],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        raw_controls(&run.stdout).is_empty(),
        "{:?}",
        raw_controls(&run.stdout)
    );
    assert!(run.stdout.contains("\\u009b31m\\u007f"), "{}", run.stdout);
    let texts: Vec<String> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .collect();
    assert!(texts.iter().any(|t| t == HOSTILE), "{texts:?}");

    // The recording, read back.
    let dir = rec.to_str().unwrap();
    for args in [
        &["replay", "--headless", "--instant", dir][..],
        &["inspect", "--markdown", dir],
    ] {
        let run = run_livetalk(scratch.path(), args, &[], &[]);
        assert!(matches!(run.code, Some(0 | 1)), "{args:?}: {}", run.stderr);
        assert_safe(&format!("{args:?}"), &run.stdout);
    }
    // The summary quotes no text of the conversation; nothing of it reaches the terminal raw.
    let run = run_livetalk(scratch.path(), &["inspect", dir], &[], &[]);
    assert!(raw_controls(&run.stdout).is_empty(), "{}", run.stdout);
    let run = run_livetalk(scratch.path(), &["inspect", "--json", dir], &[], &[]);
    assert!(raw_controls(&run.stdout).is_empty(), "{}", run.stdout);
    serde_json::from_str::<Value>(&run.stdout).unwrap();

    // check: a scenario's turn, as its report names it.
    let scenario = scratch.path().join("hostile.toml");
    // TOML's escapes for every control character (it takes none of them raw).
    let say: String = typed
        .chars()
        .map(|c| match c {
            c if c.is_control() => format!("\\u{:04X}", u32::from(c)),
            c => c.to_string(),
        })
        .collect();
    let say = format!("\"{say}\"");
    std::fs::write(
        &scenario,
        format!("name = \"hostile\"\n[[turn]]\nsay = {say}\n"),
    )
    .unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["check", scenario.to_str().unwrap(), "--endpoint", &url],
        &[key],
        &[],
    );
    assert!(matches!(run.code, Some(0 | 1)), "{}", run.stderr);
    assert!(raw_controls(&run.stdout).is_empty(), "{:?}", run.stdout);
    assert!(
        run.stdout.contains("Say \\x1b]52;c;aGFja2Vk\\x07"),
        "{}",
        run.stdout
    );

    // doctor: the model id as the environment gives it.
    let model = format!("models/x{}", &typed[4..]);
    let run = run_command(
        {
            let mut command = livetalk(scratch.path());
            command
                .arg("doctor")
                .env("LIVETALK_ENDPOINT", &url)
                .env("LIVETALK_MODEL", &model)
                .env(key.0, key.1);
            command
        },
        &[],
        Duration::from_secs(60),
    );
    assert!(raw_controls(&run.stdout).is_empty(), "{:?}", run.stdout);
    assert!(
        run.stdout.contains("models/x\\x1b]52;c;aGFja2Vk\\x07"),
        "{}",
        run.stdout
    );
}
