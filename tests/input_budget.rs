//! Input that costs far more than its size, from hostile peers and files, against the real
//! binaries: each process's peak resident memory is measured and held under the same
//! command's peak with a tiny input plus 64 MiB, and never over 512 MB; ten clients send at
//! once to `serve` and `mock`, and the servers give their memory back once the clients leave.
//! The inputs are the ones a hostile peer sent, at a size CI runs in seconds;
//! `scripts/input_costs.py` runs them at full size.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use common::ws::{JsonSocket, WAIT};
use common::*;

/// What an input may add to a process's peak over the same command with a tiny input.
const HEADROOM_MIB: f64 = 64.0;
/// What no process may reach, whatever it is sent.
const CEILING_MIB: f64 = 512.0;

const LIVE_PATH: &str =
    "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent";

fn assert_bounded(what: &str, peak: f64, tiny: f64) {
    eprintln!("{what}: peak {peak:.1} MiB, with a tiny input {tiny:.1} MiB");
    assert!(
        peak <= tiny + HEADROOM_MIB && peak < CEILING_MIB,
        "{what}: peak {peak:.1} MiB against {tiny:.1} MiB with a tiny input (at most +{HEADROOM_MIB} MiB, under {CEILING_MIB} MiB)"
    );
}

/// A field of `/proc/PID/status` in MiB (`VmHWM`: the peak resident memory; `VmRSS`: now).
fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    let kib: f64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib / 1024.0
}

// ---------------------------------------------------------------------------------------------
// livetalk against a server that streams megabyte text parts
// ---------------------------------------------------------------------------------------------

/// A Live server on loopback that answers the setup, waits for the user's turn and replies
/// with `parts` text parts of `part_bytes` each (then the turn's end), each one frame.
fn streaming_server(runtime: &tokio::runtime::Runtime, part_bytes: usize, parts: usize) -> String {
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    runtime.spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let _setup = ws.next().await;
        let ready = json!({"setupComplete": {}}).to_string();
        ws.send(Message::text(ready)).await.unwrap();
        // The user's turn.
        while let Some(Ok(frame)) = ws.next().await {
            if frame.to_text().is_ok_and(|t| t.contains("clientContent")) {
                break;
            }
        }
        let text = "word ".repeat(part_bytes / 5);
        let frame =
            json!({"serverContent": {"modelTurn": {"parts": [{"text": text}]}}}).to_string();
        for _ in 0..parts {
            if ws.send(Message::text(frame.clone())).await.is_err() {
                return;
            }
        }
        let done = json!({"serverContent": {"turnComplete": true}}).to_string();
        let _ = ws.send(Message::text(done)).await;
        while let Some(Ok(_)) = ws.next().await {}
    });
    url
}

/// `livetalk --headless` against [`streaming_server`]: its peak resident memory and exit code.
fn headless_peak(scratch: &Path, part_bytes: usize, parts: usize) -> (f64, Option<i32>, String) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = streaming_server(&runtime, part_bytes, parts);
    let peak = scratch.join(format!("peak-{part_bytes}"));
    let mut command = livetalk_measured(scratch, &peak);
    command
        .args(["--headless", "--endpoint", &url])
        .env("GEMINI_API_KEY", "fake-key-for-a-local-server");
    let run = run_command(command, &["Tell me everything."], Duration::from_secs(120));
    (peak_mib(&peak), run.code, run.stderr)
}

#[test]
fn headless_holds_its_memory_while_a_server_streams_megabyte_text_parts() {
    let scratch = tempfile::tempdir().unwrap();
    let (tiny, code, stderr) = headless_peak(scratch.path(), 5, 120);
    assert_eq!(code, Some(0), "{stderr}");
    // 120 parts of 1 MiB: the inspector used to keep every one of them.
    let (peak, code, stderr) = headless_peak(scratch.path(), 1 << 20, 120);
    assert_eq!(code, Some(0), "{stderr}");
    assert_bounded("livetalk --headless, 120 text parts of 1 MiB", peak, tiny);
}

// ---------------------------------------------------------------------------------------------
// Recordings of many short lines: inspect, replay, check and sessions
// ---------------------------------------------------------------------------------------------

/// A recording of `lines` short lines (frames, applied text, a damaged line now and then) in
/// `dir/session.jsonl`, after a metadata line and one typed turn.
fn many_line_recording(dir: &Path, lines: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let file = std::fs::File::create(dir.join("session.jsonl")).unwrap();
    let mut out = std::io::BufWriter::new(file);
    writeln!(
        out,
        r#"{{"t":0.0,"type":"meta","format":3,"livetalk_version":"0.1.0","started_at":"2026-01-02T03:04:05+00:00[UTC]","model":"models/gemini-live-test","voice":"Puck","endpoint_host":"127.0.0.1","offline":true,"devices":[],"config":{{}}}}"#
    )
    .unwrap();
    writeln!(
        out,
        r#"{{"t":0.1,"type":"applied","msg":{{"user_text":"Tell me \u001b]52;c;aGVsbG8=\u0007everything."}}}}"#
    )
    .unwrap();
    for i in 0..lines {
        let t = 0.2 + i as f64 * 1e-4;
        match i % 4 {
            0 => writeln!(
                out,
                r#"{{"t":{t:.4},"type":"recv","message":{{"serverContent":{{"modelTurn":{{"parts":[{{"text":"hi "}}]}}}}}}}}"#
            ),
            1 => writeln!(
                out,
                r#"{{"t":{t:.4},"type":"applied","msg":{{"session":{{"model_text":"hi "}}}}}}"#
            ),
            2 => writeln!(
                out,
                r#"{{"t":{t:.4},"type":"send","message":{{"realtimeInput":{{"activityStart":{{}}}}}}}}"#
            ),
            _ => writeln!(out, "{{\"t\":{t:.4},\"damaged"),
        }
        .unwrap();
    }
    out.flush().unwrap();
}

/// The peak of `livetalk ARGS` (with the recording's folder where `{}` stands).
fn command_peak(scratch: &Path, args: &[&str], dir: &Path, name: &str) -> (f64, String) {
    let peak = scratch.join(format!("peak-{name}"));
    let mut command = livetalk_measured(scratch, &peak);
    let dir = dir.display().to_string();
    command.args(
        args.iter()
            .map(|a| if *a == "{}" { dir.as_str() } else { a }),
    );
    let run = run_command(command, &[], Duration::from_secs(300));
    assert!(
        matches!(run.code, Some(0 | 1)),
        "{args:?}: exit {:?}\n{}",
        run.code,
        run.stderr
    );
    (peak_mib(&peak), run.stdout)
}

#[test]
fn a_recording_of_many_short_lines_is_read_without_holding_them() {
    let scratch = tempfile::tempdir().unwrap();
    let sessions = scratch
        .path()
        .join("data")
        .join("livetalk")
        .join("sessions");
    let tiny = sessions.join("tiny");
    let big = sessions.join("big");
    many_line_recording(&tiny, 40);
    // 200,000 lines, 11 MB: a quarter of them damaged, the rest frames and the model's text.
    many_line_recording(&big, 200_000);
    for (name, args) in [
        ("inspect", &["inspect", "{}"][..]),
        ("inspect --json", &["inspect", "--json", "{}"]),
        ("inspect --markdown", &["inspect", "--markdown", "{}"]),
        ("replay", &["replay", "--headless", "--instant", "{}"]),
        (
            "check --write-scenario",
            &["check", "--write-scenario", "{}"],
        ),
    ] {
        let (tiny_peak, _) = command_peak(scratch.path(), args, &tiny, &format!("{name}-tiny"));
        let (peak, _) = command_peak(scratch.path(), args, &big, name);
        assert_bounded(&format!("livetalk {name}, 200,000 lines"), peak, tiny_peak);
    }
    // `sessions` reads every recording of the folder.
    let (peak, table) = command_peak(scratch.path(), &["sessions"], &big, "sessions");
    assert!(table.contains("big") && table.contains("tiny"), "{table}");
    let empty = scratch.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (tiny_peak, _) = command_peak(empty.as_path(), &["sessions"], &big, "sessions-tiny");
    assert_bounded("livetalk sessions, 200,000 lines", peak, tiny_peak);
}

// ---------------------------------------------------------------------------------------------
// The servers: ten clients at once, each with a message of very many tiny parts
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Server {
    Mock,
    Serve,
}

/// A server process, killed when the test is done with it, passed or failed.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_server(server: Server, scratch: &Path) -> (Running, String) {
    let args: &[&str] = match server {
        Server::Mock => &["mock", "--listen", "127.0.0.1:0"],
        Server::Serve => &["serve", "--listen", "127.0.0.1:0", "--offline"],
    };
    let mut child = livetalk(scratch)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = LineWatcher::new(child.stdout.take().unwrap()).wait_for_url(WAIT);
    (Running(child), url)
}

/// One client's session, set up, then its one costly message (`items` parts or turns), and
/// what the server answered it with: the close reason (the mock) or the error (`serve`), or
/// the answer's text when the message was taken in.
async fn costly_client(server: Server, base: String, items: usize) -> String {
    match server {
        Server::Mock => {
            let mut ws = JsonSocket::connect(format!("{base}{LIVE_PATH}")).await;
            ws.send(json!({"setup": {"model": "models/m", "generationConfig": {"responseModalities": ["TEXT"]}}}))
                .await;
            ws.wait_for(|m| m.get("setupComplete").is_some()).await;
            // Tiny turns, as a hostile client sends them in one frame.
            let turns =
                vec![r#"{"role":"user","parts":[{"text":"Is the lamp on?"}]}"#; items].join(",");
            let frame = format!(r#"{{"clientContent":{{"turns":[{turns}],"turnComplete":true}}}}"#);
            ws.ws.send(Message::text(frame)).await.unwrap();
            // Refused (the connection closes, saying why) or answered.
            match ws
                .until(|m| m["serverContent"]["turnComplete"] == true)
                .await
            {
                Ok(answer) => format!("answered: {answer:?}"),
                Err(closed) => format!("closed {}: {}", closed.code, closed.reason),
            }
        }
        Server::Serve => {
            let mut ws = JsonSocket::connect(base).await;
            ws.send(json!({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/m", "generationConfig": {"responseModalities": ["TEXT"]}}}}))
                .await;
            ws.wait_for(|m| m["type"] == "SETUP_COMPLETE").await;
            // One part the model can answer, then the empty ones.
            let parts = std::iter::once(r#"{"text":"Is the lamp on?"}"#)
                .chain(std::iter::repeat_n("{}", items - 1))
                .collect::<Vec<_>>()
                .join(",");
            let frame = format!(
                r#"{{"type":"SEND_MESSAGE","payload":{{"parts":[{parts}],"turnComplete":true}}}}"#
            );
            ws.ws.send(Message::text(frame)).await.unwrap();
            let answer = ws
                .until(|m| m["type"] == "GEMINI_ERROR" || m["type"] == "TURN_COMPLETE")
                .await
                .unwrap();
            let last = answer.last().unwrap();
            match last["type"].as_str() {
                Some("GEMINI_ERROR") => format!(
                    "error: {}",
                    last["payload"]["message"].as_str().unwrap_or_default()
                ),
                _ => format!("answered: {answer:?}"),
            }
        }
    }
}

/// What ten clients sending at once were answered, the server's peak, its resident memory
/// before the clients came, and the process (the clients are gone).
struct TenAtOnce {
    answers: Vec<String>,
    peak: f64,
    before: f64,
    child: Running,
}

/// Starts `server` and sends ten costly messages of `items` at once.
fn ten_at_once(server: Server, scratch: &Path, items: usize) -> TenAtOnce {
    let (child, url) = spawn_server(server, scratch);
    let pid = child.0.id();
    let before = status_mib(pid, "VmRSS");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answers = runtime.block_on(async {
        let clients: Vec<_> = (0..10)
            .map(|_| tokio::spawn(costly_client(server, url.clone(), items)))
            .collect();
        let mut answers = Vec::new();
        for client in clients {
            answers.push(
                tokio::time::timeout(Duration::from_secs(120), client)
                    .await
                    .expect("every client is answered")
                    .unwrap(),
            );
        }
        answers
    });
    drop(runtime);
    TenAtOnce {
        answers,
        peak: status_mib(pid, "VmHWM"),
        before,
        child,
    }
}

/// Ten clients at once, each with a message of `items` tiny parts: each is refused in
/// livetalk's words (`refused`: how each answer must start), the peak stays within the
/// headroom of the same ten with a tiny message, and 10 s after they leave the server's
/// resident memory is back within 64 MiB of where it started.
fn servers_hold_and_give_back(server: Server, items: usize, refused: &[&str]) {
    let scratch = tempfile::tempdir().unwrap();
    let tiny = ten_at_once(server, scratch.path(), 1).peak;
    let TenAtOnce {
        answers,
        peak,
        before,
        child,
    } = ten_at_once(server, scratch.path(), items);
    let mut said: Vec<&String> = answers.iter().collect();
    said.dedup();
    eprintln!("{server:?} answered: {said:#?}");
    assert_bounded(
        &format!("livetalk {server:?}, ten clients with {items} tiny parts each"),
        peak,
        tiny,
    );
    for answer in &answers {
        assert!(
            refused.iter().any(|words| answer.starts_with(words))
                && answer.contains("livetalk holds for input at once"),
            "{server:?} answered: {answer}"
        );
    }
    let left = Instant::now();
    let back = poll(Duration::from_secs(10), Duration::from_millis(250), || {
        let now = status_mib(child.0.id(), "VmRSS");
        (now <= before + HEADROOM_MIB).then_some(now)
    });
    let now = status_mib(child.0.id(), "VmRSS");
    drop(child);
    eprintln!(
        "{server:?}: {before:.1} MiB before the clients, {now:.1} MiB {:.1} s after they left",
        left.elapsed().as_secs_f64()
    );
    assert!(
        back.is_some(),
        "{server:?}: {now:.1} MiB 10 s after the clients left, against {before:.1} MiB before them"
    );
}

#[test]
fn the_mock_holds_ten_clients_sending_frames_of_many_tiny_turns_and_gives_the_memory_back() {
    // 200,000 turns in a 10.3 MiB frame, near the largest the mock reads (a hostile client sent
    // 700,000 in 28.7 MB, which it now refuses from the frame's header): ten of them are read
    // in turn, not at once, and each is too costly (1009), or, for one that waited behind the
    // others longer than the budget's deadline, busy (1013).
    servers_hold_and_give_back(
        Server::Mock,
        200_000,
        &["closed 1009: A message of ", "closed 1013: A message of "],
    );
}

#[test]
fn serve_holds_ten_clients_sending_messages_of_many_empty_parts_and_gives_the_memory_back() {
    // A million empty parts in a 3 MB SEND_MESSAGE, as a hostile app sent them.
    servers_hold_and_give_back(
        Server::Serve,
        1_000_000,
        &["error: The message was dropped: a message of"],
    );
}

/// A line on stdin longer than the input line holds (1 MiB) is read past, not held, and
/// skipped with a warning; the next line is the turn.
#[test]
fn a_stdin_line_past_the_input_lines_cap_is_skipped_with_a_warning() {
    let scratch = tempfile::tempdir().unwrap();
    let long = "x".repeat(5 << 20);
    let peak = scratch.path().join("peak");
    let mut command = livetalk_measured(scratch.path(), &peak);
    command.args(["--headless", "--offline"]);
    let run = run_command(
        command,
        &[&long, SMART_HOME_LINES[0]],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "warning: a line of 5.0 MiB on stdin was skipped: a turn holds at most 1.0 MiB"
        ),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("currently off"), "{}", run.stdout);
    assert!(!run.stdout.contains("xxxx"), "{}", run.stdout);
}

/// The smaller refusals, each one sentence in livetalk's words with the right exit status: a
/// port past 65535 (never dialled as 80), a `check --record` folder that cannot be made and a
/// `--junit` report that cannot be written (2, before anything runs), and `doctor` against a
/// server whose upgrade answer is megabytes of headers (not tungstenite's "Attack attempt").
#[test]
fn smaller_refusals_are_said_in_livetalks_words_with_the_right_exit() {
    let scratch = tempfile::tempdir().unwrap();
    let run = run_livetalk(
        scratch.path(),
        &["--headless", "--endpoint", "ws://127.0.0.1:99999"],
        &[("GEMINI_API_KEY", "fake-key-for-a-local-server")],
        &[],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("names port 99999, which is not a port (1 to 65535)"),
        "{}",
        run.stderr
    );

    let scenario = scratch.path().join("lamp.toml");
    std::fs::write(
        &scenario,
        "name = \"lamp\"\n[[turn]]\nsay = \"Is the living room lamp on?\"\n",
    )
    .unwrap();
    let file = scratch.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_a_file = file.join("runs");
    let report = file.join("report.xml");
    for (flag, path, says) in [
        ("--record", &under_a_file, "the folder cannot be made"),
        ("--junit", &report, "the report cannot be written there"),
    ] {
        let started = Instant::now();
        let run = run_livetalk(
            scratch.path(),
            &[
                "check",
                scenario.to_str().unwrap(),
                flag,
                path.to_str().unwrap(),
            ],
            &[],
            &[],
        );
        assert_eq!(run.code, Some(2), "{flag}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(says), "{flag}: {}", run.stderr);
        assert!(
            !run.stdout.contains("turn 1"),
            "{flag}: refused before the first run:\n{}",
            run.stdout
        );
        eprintln!("check {flag} refused in {:?}", started.elapsed());
    }

    // A server that answers the upgrade with an endless header.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    runtime.spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n")
                    .await;
                let header = format!("X-Filler: {}\r\n", "a".repeat(1000));
                for _ in 0..100_000 {
                    if stream.write_all(header.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut command = livetalk(scratch.path());
    command
        .arg("doctor")
        .env("LIVETALK_ENDPOINT", &url)
        .env("GEMINI_API_KEY", "fake-key-for-a-local-server");
    let run = run_command(command, &[], Duration::from_secs(60));
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        run.stdout.contains(
            "answered the WebSocket upgrade with more than the 64 KiB of headers livetalk reads"
        ),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("Attack attempt"), "{}", run.stdout);
}
