//! MCP servers as tools, end to end: the real binary against the reference server
//! (`@modelcontextprotocol/server-everything`, over stdio) and the Python SDK's FastMCP (over
//! streamable HTTP and stdio, `tests/mcp/fastmcp_server.py`, which records what it received);
//! and the library's engine and app against the same servers for progress, tool-list changes,
//! turning tools off, crashes and restarts. `scripts/test.sh` installs both servers.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::harness::{Harness, default_settings, fast_mock, test_policy, tool_calls_at};
use common::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use livetalk::app::{App, AppInit, Effect, Msg, NoticeLevel, Popup, ToolRow, ToolState};
use livetalk::engine::Engine;
use livetalk::tools::mcp::{McpEvent, McpHub, ServerSpec, ServerState};
use livetalk::tools::{Approval, Decider, Gate, Origin, SmartHome, Unasked, builtin_registry};
use livetalk_mock::{Fault, FaultAction, Moment};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The reference server's entry point, as `scripts/test.sh` installs it.
fn server_everything() -> PathBuf {
    let path =
        root().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.exists(),
        "{} is missing: scripts/test.sh installs it (npm install --prefix tests/mcp)",
        path.display()
    );
    path
}

/// The Python with the `mcp` SDK, as `scripts/test.sh` installs it.
fn python() -> PathBuf {
    let path = root().join(".venv/bin/python");
    assert!(
        path.exists(),
        "{} is missing: scripts/test.sh makes the venv and installs the Python `mcp` package",
        path.display()
    );
    path
}

fn fastmcp_script() -> PathBuf {
    root().join("tests/mcp/fastmcp_server.py")
}

/// The test FastMCP server over stdio, recording into `record`; its calls need no approval.
fn fastmcp_stdio(name: &str, record: &Path) -> ServerSpec {
    ServerSpec {
        startup_timeout: Duration::from_secs(30),
        approval: Some(Approval::Never),
        ..ServerSpec::stdio(
            name,
            python().display().to_string(),
            vec![
                fastmcp_script().display().to_string(),
                record.display().to_string(),
                "stdio".to_owned(),
            ],
        )
    }
}

/// What the FastMCP server wrote into its record.
fn read_record(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until the record holds an event `event` (the server writes it as it happens).
fn wait_for_record(path: &Path, event: &str) -> Vec<Value> {
    let mut record = Vec::new();
    let found = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        record = read_record(path);
        record.iter().any(|e| e["event"] == event).then_some(())
    });
    assert!(
        found.is_some(),
        "no {event:?} in the server's record: {record:#?}"
    );
    record
}

/// The same scenario as a file for `livetalk mock --scenario`.
fn scenario_file(dir: &Path, calls: &[(&str, Value)]) -> PathBuf {
    let faults: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"at": "user_turn", "nth": i + 1, "action": "tool_calls", "name": name, "args": args})
        })
        .collect();
    let path = dir.join("scenario.json");
    std::fs::write(&path, json!({ "fault": faults }).to_string()).unwrap();
    path
}

/// `livetalk --headless --json` against `mock` (`None`: no key and no endpoint, so the embedded
/// offline demo model), with only PATH from this environment (so a server's environment holds
/// little besides what the config gives it).
fn run_headless(
    scratch: &Path,
    mock: Option<&MockProcess>,
    extra: &[&str],
    lines: &[&str],
) -> (Vec<Value>, String) {
    let mut command = livetalk_with_only_path(scratch);
    command.args(["--headless", "--json"]);
    if let Some(mock) = mock {
        command.args(["--endpoint", &mock.url]);
    }
    command.args(extra);
    let Run {
        code,
        stdout,
        stderr,
    } = run_command(command, lines, Duration::from_secs(90));
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let events = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    (events, stderr)
}

fn tool_events(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["type"] == "tool_call").collect()
}

/// The `response` object the model got for one call.
fn answer(event: &Value) -> &Value {
    &event["response"]["response"]
}

#[test]
fn the_reference_server_over_stdio_through_the_real_binary() {
    let scratch = tempfile::tempdir().unwrap();
    let everything = server_everything();
    std::fs::write(
        scratch.path().join("config.toml"),
        format!(
            r#"[audio]
enabled = false
[tools]
max_response_bytes = 65536
[mcp_servers.everything]
command = "node"
args = [{js:?}, "stdio"]
env = {{ LIVETALK_TEST_MARK = "mark-from-the-config" }}
startup_timeout_sec = 30
tool_timeout_sec = 3
approval = "never"
"#,
            js = everything.display().to_string()
        ),
    )
    .unwrap();
    let scenario = scenario_file(
        scratch.path(),
        &[
            ("echo", json!({"message": "hello"})),
            ("get-sum", json!({"a": 2, "b": 3})),
            ("get-env", json!({})),
            (
                "trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            ),
        ],
    );
    let mock = MockProcess::start(
        scratch.path(),
        &[
            "--speed",
            "20",
            "--scenario",
            &scenario.display().to_string(),
        ],
    );
    let (events, stderr) = run_headless(
        scratch.path(),
        Some(&mock),
        &[],
        &[
            "echo please",
            "add please",
            "environment please",
            "take your time",
        ],
    );
    assert!(
        events.iter().any(|e| e["type"] == "notice"
            && e["text"]
                .as_str()
                .unwrap()
                .starts_with("MCP server everything is up with")),
        "the server's start is announced: {events:#?}"
    );
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 4, "{events:#?}");
    assert_eq!(calls[0]["name"], "echo");
    assert_eq!(calls[0]["state"], "ok", "{:#?}", calls[0]);
    assert_eq!(answer(calls[0])["result"], "Echo: hello");
    assert_eq!(calls[1]["state"], "ok", "{:#?}", calls[1]);
    assert!(
        answer(calls[1])["result"].as_str().unwrap().contains('5'),
        "{:#?}",
        calls[1]
    );
    assert_eq!(calls[2]["state"], "ok", "{:#?}", calls[2]);
    assert!(
        answer(calls[2])["result"]
            .as_str()
            .unwrap()
            .contains("\"LIVETALK_TEST_MARK\": \"mark-from-the-config\""),
        "the config's env reaches the server: {:#?}",
        calls[2]
    );
    // Stopped by its time limit: the model is told, and the server is told to stop.
    assert_eq!(calls[3]["state"], "timed out", "{:#?}", calls[3]);
    assert_eq!(answer(calls[3])["success"], false);
    assert!(
        answer(calls[3])["error"].as_str().unwrap().contains("3 s"),
        "{:#?}",
        calls[3]
    );
    // Every call was answered: the mock's model counted the answers.
    let replies: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "model")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(replies.len(), 4, "{events:#?}");
    assert!(
        replies.iter().all(|r| r.contains("got 1 answers")),
        "{replies:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_offline_demo_model_calls_the_reference_servers_tools_by_name() {
    let scratch = tempfile::tempdir().unwrap();
    // From the flag, so with no approval configured: these run under the headless default
    // (`--approve read-only`) because the server annotates both tools read-only.
    let everything = format!("everything=node '{}' stdio", server_everything().display());
    let (events, stderr) = run_headless(
        scratch.path(),
        None,
        &["--mcp", &everything],
        &[
            "use the echo tool with message hello",
            "call get-sum with a 2 and b 3",
        ],
    );
    assert!(
        events
            .iter()
            .any(|e| e["endpoint_host"] == "offline demo model"),
        "no key, no endpoint: the embedded demo model answers: {events:#?}"
    );
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 2, "{events:#?}\n{stderr}");
    assert_eq!(calls[0]["name"], "echo");
    assert_eq!(
        calls[0]["args"],
        json!({"message": "hello"}),
        "{:#?}",
        calls[0]
    );
    assert_eq!(calls[0]["state"], "ok", "{:#?}", calls[0]);
    assert_eq!(answer(calls[0])["result"], "Echo: hello");
    assert_eq!(calls[1]["name"], "get-sum");
    assert_eq!(
        calls[1]["args"],
        json!({"a": 2.0, "b": 3.0}),
        "{:#?}",
        calls[1]
    );
    assert_eq!(calls[1]["state"], "ok", "{:#?}", calls[1]);
    assert_eq!(answer(calls[1])["result"], "The sum of 2 and 3 is 5.");
    // The model read the server's answers and said them.
    let replies: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "model")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{events:#?}");
    assert!(replies[0].contains("Echo: hello"), "{replies:?}");
    assert!(
        replies[1].contains("The sum of 2 and 3 is 5"),
        "{replies:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn headless_approve_policies_decide_for_the_reference_servers_tools() {
    // server-everything annotates `echo` read-only and `toggle-simulated-logging` not: with
    // nobody to ask, the policy decides, and a refusal is what the model gets.
    let everything = format!("everything=node '{}' stdio", server_everything().display());
    let lines = [
        "use the echo tool with message hello",
        "use the toggle-simulated-logging tool",
    ];
    let run = |policy: Option<&str>| {
        let scratch = tempfile::tempdir().unwrap();
        let mut extra = vec!["--mcp", everything.as_str()];
        if let Some(policy) = policy {
            extra.extend(["--approve", policy]);
        }
        let (events, stderr) = run_headless(scratch.path(), None, &extra, &lines);
        let calls: Vec<Value> = tool_events(&events).into_iter().cloned().collect();
        assert_eq!(calls.len(), 2, "{policy:?}: {events:#?}\n{stderr}");
        assert_eq!(calls[0]["name"], "echo");
        assert_eq!(calls[1]["name"], "toggle-simulated-logging");
        calls
    };
    let refused = |call: &Value, words: &str| {
        let response = answer(call);
        assert_eq!(response["success"], false, "{call:#}");
        let error = response["error"].as_str().unwrap_or_default();
        assert!(error.contains(words), "{words:?} in {error:?}");
    };
    let ran = |call: &Value| {
        assert_eq!(call["state"], "ok", "{call:#}");
        assert!(answer(call).get("success").is_none(), "{call:#}");
    };

    // The default, read-only: the read-only tool runs, the other is refused.
    let calls = run(None);
    ran(&calls[0]);
    assert_eq!(answer(&calls[0])["result"], "Echo: hello");
    refused(&calls[1], "--approve read-only");
    // none: no MCP call runs.
    let calls = run(Some("none"));
    refused(&calls[0], "--approve none");
    refused(&calls[1], "--approve none");
    // all: both run, the toggle really reached the server.
    let calls = run(Some("all"));
    ran(&calls[0]);
    ran(&calls[1]);
    let said = answer(&calls[1])["result"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(said.contains("simulated, random-leveled logging"), "{said}");
}

#[test]
fn what_the_user_set_wins_and_a_servers_hints_are_only_claims() {
    // `delete_all_files` claims both read-only and destructive: it must ask, so headless under
    // the default policy it is refused, and the server never sees the call. `whoami` claims
    // read-only only: it runs, and says on whose word.
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let server = format!(
        "files={} {} {} stdio",
        python().display(),
        fastmcp_script().display(),
        record.display()
    );
    let lines = ["use the delete_all_files tool", "use the whoami tool"];
    let (events, stderr) = run_headless(scratch.path(), None, &["--mcp", &server], &lines);
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 2, "{events:#?}\n{stderr}");
    assert_eq!(calls[0]["name"], "delete_all_files");
    assert_eq!(answer(calls[0])["success"], false, "{:#}", calls[0]);
    let error = answer(calls[0])["error"].as_str().unwrap_or_default();
    assert!(error.contains("--approve read-only"), "{error}");
    assert!(calls[0]["unasked"].is_null(), "{:#}", calls[0]);
    assert_eq!(calls[1]["name"], "whoami");
    assert_eq!(calls[1]["state"], "ok", "{:#}", calls[1]);
    assert_eq!(calls[1]["unasked"], "its server says it only reads");
    assert!(
        !read_record(&record).iter().any(|e| e["event"] == "ran"),
        "the destructive tool ran: {:#?}",
        read_record(&record)
    );

    // What the user set wins over every policy: a built-in set to "always" is refused under
    // --approve none (nobody can approve it), and the destructive tool set to "never" runs.
    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[tools.approval]\nget_current_time = \"always\"\n\n\
             [mcp_servers.files]\ncommand = {:?}\nargs = [{:?}, {:?}, \"stdio\"]\n\n\
             [mcp_servers.files.tools.delete_all_files]\napproval = \"never\"\n",
            python().display().to_string(),
            fastmcp_script().display().to_string(),
            record.display().to_string(),
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let lines = [
        "use the get_current_time tool",
        "use the delete_all_files tool",
    ];
    let (events, stderr) = run_headless(
        scratch.path(),
        None,
        &["--config", &config, "--approve", "none"],
        &lines,
    );
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 2, "{events:#?}\n{stderr}");
    assert_eq!(calls[0]["name"], "get_current_time");
    let error = answer(calls[0])["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("approve every call") && error.contains("--approve none"),
        "{:#}",
        calls[0]
    );
    assert_eq!(calls[1]["name"], "delete_all_files");
    assert_eq!(calls[1]["state"], "ok", "{:#}", calls[1]);
    assert_eq!(calls[1]["unasked"], "approval = \"never\" in your config");
    assert!(read_record(&record).iter().any(|e| e["event"] == "ran"));
}

#[test]
fn a_tool_answer_too_long_to_read_is_said_at_once_not_at_the_time_limit() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let server = format!(
        "big={} {} {} stdio",
        python().display(),
        fastmcp_script().display(),
        record.display()
    );
    let (events, stderr) = run_headless(
        scratch.path(),
        None,
        &["--mcp", &server],
        &["use the huge_answer tool"],
    );
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 1, "{events:#?}\n{stderr}");
    let error = answer(calls[0])["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("larger than 2 MiB") && error.contains("huge_answer"),
        "{:#}",
        calls[0]
    );
    // Well before the call's time limit (10 s by default).
    let took = calls[0]["duration_ms"].as_f64().unwrap_or(f64::MAX);
    assert!(took < 5_000.0, "took {took} ms");
}

#[test]
fn an_http_server_quoting_the_credentials_it_was_sent_shows_none_of_them() {
    let scratch = tempfile::tempdir().unwrap();
    let mut server = Command::new(python())
        .arg(root().join("tests/mcp/quoting_http_server.py"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let (bearer, password, query_key) =
        ("mcp-bearer-SECRET-4242", "url-pass-5151", "QUERYKEY-6161");
    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.quoting]\n\
             url = \"http://svc:{password}@127.0.0.1:{port}/mcp?api_key={query_key}\"\n\n\
             [mcp_servers.bearing]\n\
             url = \"http://127.0.0.1:{port}/mcp\"\n\
             bearer_token_env_var = \"QUOTING_TOKEN\"\n",
            port = port.trim()
        ),
    )
    .unwrap();
    let recording = scratch.path().join("rec");
    let mut command = livetalk_with_only_path(scratch.path());
    command
        .env("QUOTING_TOKEN", bearer)
        .env("LIVETALK_LOG", "debug")
        .args(["--headless", "--json", "--config"])
        .arg(&config)
        .arg("--record")
        .arg(&recording);
    let run = run_command(command, &["hello"], Duration::from_secs(60));
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(
        said.matches("refused the MCP handshake").count(),
        2,
        "the server's words, once a server:\n{said}"
    );
    assert!(
        said.contains("Bearer [redacted]") && said.contains("Basic [redacted]"),
        "credentials masked:\n{said}"
    );
    for jargon in ["rmcp", "Transport [", "WorkerTransport"] {
        assert!(!said.contains(jargon), "{jargon} in:\n{said}");
    }
    assert!(recording.join("session.jsonl").exists(), "{said}");
    assert_no_secrets(
        &run,
        scratch.path(),
        // With the Basic credentials the client makes of the URL's user and password.
        &[bearer, password, query_key, "c3ZjOnVybC1wYXNzLTUxNTE"],
        &[&config],
    );
}

/// A FastMCP server over streamable HTTP on a free loopback port, ready when this returns.
struct HttpServer {
    child: Child,
    port: u16,
    /// Read on, so the server never blocks on a full pipe.
    _stderr: LineWatcher,
}

impl HttpServer {
    fn start(record: &Path) -> HttpServer {
        let port = common::free_port();
        let mut child = Command::new(python())
            .arg(fastmcp_script())
            .arg(record)
            .args(["http", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = LineWatcher::new(child.stderr.take().unwrap());
        stderr.wait_for(Duration::from_secs(30), |l| {
            l.contains("Uvicorn running on")
        });
        HttpServer {
            child,
            port,
            _stderr: stderr,
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn fastmcp_over_http_and_stdio_through_the_real_binary() {
    let scratch = tempfile::tempdir().unwrap();
    let web_record = scratch.path().join("web.jsonl");
    let local_record = scratch.path().join("local.jsonl");
    let web = HttpServer::start(&web_record);
    std::fs::write(
        scratch.path().join("config.toml"),
        format!(
            r#"[audio]
enabled = false
[mcp_servers.web]
url = "http://127.0.0.1:{port}/mcp"
startup_timeout_sec = 30
tool_timeout_sec = 2
approval = "never"
"#,
            port = web.port
        ),
    )
    .unwrap();
    // Both servers offer the same tools: every one is declared as SERVER__TOOL.
    let scenario = scenario_file(
        scratch.path(),
        &[
            ("web__fail", json!({"why": "on purpose"})),
            ("web__count_slowly", json!({"steps": 40, "step_secs": 0.25})),
            ("local__whoami", json!({})),
        ],
    );
    let mock = MockProcess::start(
        scratch.path(),
        &[
            "--speed",
            "20",
            "--scenario",
            &scenario.display().to_string(),
        ],
    );
    let local = format!(
        "local={} '{}' '{}' stdio",
        python().display(),
        fastmcp_script().display(),
        local_record.display()
    );
    let (events, stderr) = run_headless(
        scratch.path(),
        Some(&mock),
        &["--mcp", &local],
        &["fail please", "count please", "who are you"],
    );
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 3, "{events:#?}\n{stderr}");
    assert_eq!(calls[0]["state"], "error", "{:#?}", calls[0]);
    assert_eq!(
        *answer(calls[0]),
        json!({"success": false, "error": "it failed: on purpose"}),
        "an isError result is the model's error"
    );
    assert_eq!(calls[1]["state"], "timed out", "{:#?}", calls[1]);
    assert_eq!(calls[2]["state"], "ok", "{:#?}", calls[2]);
    assert_eq!(answer(calls[2])["result"], "the livetalk test server");

    // What the server itself saw: the cancellation, and a call that never ran to its end.
    let record = wait_for_record(&web_record, "cancelled");
    let cancels: Vec<&Value> = record
        .iter()
        .filter(|e| e["event"] == "cancel_notification")
        .collect();
    assert_eq!(cancels.len(), 1, "{record:#?}");
    assert!(
        cancels[0]["reason"]
            .as_str()
            .unwrap()
            .contains("livetalk stopped the call"),
        "{record:#?}"
    );
    assert!(
        record.iter().any(|e| e["event"] == "started"),
        "{record:#?}"
    );
    assert!(
        !record.iter().any(|e| e["event"] == "finished"),
        "{record:#?}"
    );
    assert!(
        read_record(&local_record)
            .iter()
            .any(|e| e["event"] == "ready"),
        "the --mcp server ran"
    );
}

/// The engine and app of a session against the embedded mock running `faults`, with these
/// MCP servers started first.
async fn session(faults: Vec<Fault>, servers: Vec<ServerSpec>) -> Harness {
    let settings = default_settings();
    let mock = fast_mock(faults).await;
    let home = SmartHome::new();
    let registry = Arc::new(
        builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap(),
    );
    let mut engine = Engine::new(registry, &home, Decider::Person);
    engine.set_reconnect_policy(test_policy(4));
    let (hub, events) = McpHub::start(servers).await;
    engine.attach_mcp(hub, events);
    let app = App::new(AppInit {
        catalog: engine.catalog(),
        ..AppInit::new(settings.model.clone(), true, home.snapshot())
    });
    Harness::ready(&settings, mock, engine, app, home).await
}

fn last_call(app: &App) -> Option<&livetalk::app::ToolCallRecord> {
    app.tool_calls().last()
}

fn has_notice(app: &App, level: NoticeLevel, text: &str) -> bool {
    app.notices()
        .iter()
        .any(|n| n.level == level && n.text.contains(text))
}

fn screen(app: &mut App) -> String {
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 40)).unwrap();
    let mut layout = None;
    terminal
        .draw(|frame| layout = Some(livetalk::ui::draw(frame, app)))
        .unwrap();
    screen_text(terminal.backend().buffer())
}

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_shows_in_the_tool_log_while_the_call_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let mut h = session(
        vec![tool_calls_at(
            1,
            "count_slowly",
            json!({"steps": 4, "step_secs": 0.4}),
        )],
        vec![fastmcp_stdio("local", &record)],
    )
    .await;
    h.apply(Msg::UserText("count to four".into())).await;
    h.until("progress shown for the running call", |app| {
        last_call(app).is_some_and(|c| c.state == ToolState::Running && c.progress.is_some())
    })
    .await;
    let progress = last_call(&h.app).unwrap().progress.clone().unwrap();
    assert_eq!(progress.total, Some(4.0));
    assert!(
        progress.message.as_deref().unwrap().ends_with("of 4"),
        "{progress:?}"
    );
    let shown = format!("{}/4: step {} of 4", progress.progress, progress.progress);
    let drawn = screen(&mut h.app);
    assert!(
        drawn.contains(&shown),
        "the tool log shows {shown:?}:\n{drawn}"
    );
    h.until("the call finished", |app| {
        last_call(app).is_some_and(|c| c.state == ToolState::Ok)
    })
    .await;
    let call = last_call(&h.app).unwrap();
    assert_eq!(
        call.response.as_ref().unwrap().response["result"],
        "counted to 4"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_cancellation_reaches_the_server_and_stops_the_call() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let mut h = session(
        vec![
            tool_calls_at(1, "count_slowly", json!({"steps": 80, "step_secs": 0.25})),
            Fault::once(Moment::UserTurn, 2, FaultAction::CancelToolCalls),
        ],
        vec![fastmcp_stdio("local", &record)],
    )
    .await;
    h.apply(Msg::UserText("count for a long time".into())).await;
    // Progress means the server is running the call.
    h.until("the call runs on the server", |app| {
        last_call(app).is_some_and(|c| c.progress.is_some())
    })
    .await;
    h.apply(Msg::UserText("never mind".into())).await;
    h.until("the call cancelled", |app| {
        app.tool_calls()
            .first()
            .is_some_and(|c| c.state == ToolState::Cancelled)
    })
    .await;
    let record = tokio::task::spawn_blocking(move || wait_for_record(&record, "cancelled"))
        .await
        .unwrap();
    let cancels: Vec<&Value> = record
        .iter()
        .filter(|e| e["event"] == "cancel_notification")
        .collect();
    assert_eq!(cancels.len(), 1, "{record:#?}");
    assert!(
        !record.iter().any(|e| e["event"] == "finished"),
        "{record:#?}"
    );
    assert_eq!(
        h.mock.stray_tool_responses(),
        0,
        "a cancelled call is not answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_declared_at_the_next_reconnect() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let server = ServerSpec {
        approval: None,
        tool_approvals: [("add_tool".to_owned(), Approval::Never)].into(),
        ..fastmcp_stdio("local", &record)
    };
    let mut h = session(
        vec![
            tool_calls_at(1, "add_tool", json!({})),
            Fault::once(Moment::UserTurn, 2, FaultAction::Drop),
        ],
        vec![server],
    )
    .await;
    let first = h.mock.declared_tools();
    assert_eq!(first.len(), 1);
    assert!(first[0].contains(&"whoami".to_owned()), "{first:?}");
    // A tool with no parameters is declared without `parameters`.
    let registry = h.engine.registry();
    let declarations = registry.declarations();
    let whoami = declarations.iter().find(|d| d.name == "whoami").unwrap();
    assert!(whoami.parameters.is_none(), "{whoami:?}");
    assert!(!first[0].contains(&"late_tool".to_owned()));
    // Whether a call waits for the user: the tool's own setting, else the server's
    // annotations (read-only and not destructive runs), else it asks.
    let gate = |configured, claims_read_only| Gate {
        origin: Origin::Mcp("local".into()),
        configured,
        claims_read_only,
    };
    assert_eq!(
        registry.gate("add_tool"),
        gate(Some(Approval::Never), false)
    );
    assert_eq!(registry.gate("whoami"), gate(None, true));
    assert_eq!(registry.gate("delete_all_files"), gate(None, false));
    assert_eq!(registry.gate("fail"), gate(None, false));
    let person = |name| registry.gate(name).unasked_in_person();
    assert_eq!(person("add_tool"), Some(Unasked::SetToNever));
    assert_eq!(person("whoami"), Some(Unasked::ServerSaysReadOnly));
    assert_eq!(person("delete_all_files"), None);
    assert_eq!(person("fail"), None);
    assert_eq!(registry.gate("get_current_time").origin, Origin::BuiltIn);

    h.say("add a tool").await;
    h.until("the change announced", |app| {
        has_notice(app, NoticeLevel::Info, "changed its tools")
    })
    .await;
    assert!(h.engine.registry().contains("late_tool"));
    assert_eq!(
        h.mock.declared_tools().len(),
        1,
        "no reconnect just for that"
    );
    // The connection drops; the next one declares the new tool and resumes the session.
    h.say("and now").await;
    h.until("reconnected", |app| {
        has_notice(app, NoticeLevel::Info, "the conversation continues")
    })
    .await;
    let setups = h.mock.declared_tools();
    assert_eq!(setups.len(), 2, "{setups:?}");
    assert!(setups[1].contains(&"late_tool".to_owned()), "{setups:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_a_tool_off_hands_over_at_the_turn_boundary_and_keeps_the_conversation() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let mut h = session(
        vec![tool_calls_at(2, "whoami", json!({}))],
        vec![fastmcp_stdio("local", &record)],
    )
    .await;
    // A turn first, so the server has given a resumption handle.
    h.say("Is the living room lamp on?").await;
    assert!(
        h.app
            .catalog()
            .tools
            .iter()
            .any(|t| t.name == "whoami" && t.enabled)
    );

    // From the tool list (F8): select whoami, press Space.
    h.apply(key(KeyCode::F(8))).await;
    let row = h
        .app
        .tool_rows()
        .iter()
        .position(|r| matches!(r, ToolRow::Tool(t) if t.name == "whoami"))
        .unwrap();
    for _ in 0..row {
        h.apply(key(KeyCode::Down)).await;
    }
    assert_eq!(h.app.view().popup, Some(Popup::Tools { selected: row }));
    h.apply(key(KeyCode::Char(' '))).await;
    assert!(h.app.tools_pending());
    let drawn = screen(&mut h.app);
    assert!(drawn.contains("[off] whoami"), "{drawn}");

    h.until("handed over", |app| !app.tools_pending()).await;
    h.until_ready().await;
    let setups = h.mock.declared_tools();
    assert_eq!(setups.len(), 2, "{setups:?}");
    assert!(setups[0].contains(&"whoami".to_owned()));
    assert!(!setups[1].contains(&"whoami".to_owned()), "{setups:?}");
    assert!(setups[1].contains(&"count_slowly".to_owned()), "{setups:?}");
    assert_eq!(
        h.mock.resumptions(),
        1,
        "the session was resumed, not started afresh"
    );
    assert!(has_notice(
        &h.app,
        NoticeLevel::Info,
        "the conversation continues"
    ));

    // A call that still comes for it is answered, with a refusal.
    h.say("who are you").await;
    let call = last_call(&h.app).unwrap();
    assert_eq!(call.name, "whoami");
    let ToolState::Error(why) = &call.state else {
        panic!("refused: {call:?}");
    };
    assert!(why.contains("turned off"), "{why}");

    // The resumed model has the new setup's tools: asked for whoami by name, it has none.
    let calls = h.app.tool_calls().len();
    h.say("use the whoami tool").await;
    assert_eq!(h.app.tool_calls().len(), calls, "{:?}", last_call(&h.app));
    let said = h.last_reply();
    assert!(said.contains("no tool called whoami"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_answers_every_call_and_restarts_from_the_tool_list() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record.jsonl");
    let mut h = session(
        vec![
            tool_calls_at(1, "crash", json!({})),
            tool_calls_at(2, "whoami", json!({})),
            tool_calls_at(3, "whoami", json!({})),
        ],
        vec![fastmcp_stdio("local", &record)],
    )
    .await;
    h.say("crash please").await;
    h.until("the crash noticed", |app| {
        has_notice(app, NoticeLevel::Warning, "MCP server local stopped")
    })
    .await;
    let crashed = last_call(&h.app).unwrap();
    assert!(
        matches!(&crashed.state, ToolState::Error(why) if why.contains("stopped before it answered")),
        "{crashed:?}"
    );
    let notice = h
        .app
        .notices()
        .iter()
        .find(|n| n.text.contains("local stopped"))
        .unwrap();
    assert!(
        notice.text.contains("crashing on purpose"),
        "its last words: {notice:?}"
    );
    assert_eq!(
        h.app
            .notices()
            .iter()
            .filter(|n| n.text.contains("local stopped"))
            .count(),
        1,
        "one notice"
    );

    h.say("who are you").await;
    let refused = last_call(&h.app).unwrap();
    assert!(
        matches!(&refused.state, ToolState::Error(why) if why.contains("not running")),
        "{refused:?}"
    );
    assert!(
        h.last_reply().contains("1 of them errors"),
        "{}",
        h.last_reply()
    );

    // The tool list shows it down; r on its row restarts it.
    h.apply(key(KeyCode::F(8))).await;
    let row = h
        .app
        .tool_rows()
        .iter()
        .position(|r| matches!(r, ToolRow::Server(s) if s.name == "local"))
        .unwrap();
    assert!(matches!(
        h.app.tool_rows()[row],
        ToolRow::Server(s) if matches!(s.state, ServerState::Down(_))
    ));
    for _ in 0..row {
        h.apply(key(KeyCode::Down)).await;
    }
    let effects = h.app.clone().update(key(KeyCode::Char('r')));
    assert_eq!(
        effects,
        vec![Effect::Intent(Msg::RestartMcpServer("local".into()))]
    );
    h.apply(key(KeyCode::Char('r'))).await;
    h.until("up again", |app| {
        app.notices()
            .iter()
            .filter(|n| n.text.starts_with("MCP server local is up"))
            .count()
            == 2
    })
    .await;
    h.apply(key(KeyCode::Esc)).await;
    h.say("who are you now").await;
    let call = last_call(&h.app).unwrap();
    assert_eq!(call.state, ToolState::Ok, "{call:?}");
    assert_eq!(h.mock.stray_tool_responses(), 0);
    assert_eq!(h.mock.connections(), 1, "the session never dropped");
    assert!(
        read_record(&record)
            .iter()
            .filter(|e| e["event"] == "ready")
            .count()
            == 2,
        "the server was started twice"
    );
    let _ = std::io::stdout().flush();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_cannot_start_or_hang_at_start_are_one_notice_each() {
    let missing = ServerSpec::stdio("missing", "/nonexistent/mcp-server", vec![]);
    let silent = ServerSpec {
        startup_timeout: Duration::from_millis(500),
        ..ServerSpec::stdio("silent", "sleep", vec!["30".into()])
    };
    let started = std::time::Instant::now();
    let (hub, mut events) = McpHub::start(vec![missing, silent]).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "nothing waits past its timeout"
    );
    let mut downs = Vec::new();
    while let Ok(event) = events.try_recv() {
        downs.push(event);
    }
    assert_eq!(downs.len(), 2, "{downs:?}");
    for event in &downs {
        let McpEvent::Down { server, message } = event else {
            panic!("{event:?}");
        };
        match server.as_str() {
            "missing" => assert!(message.contains("cannot run"), "{message}"),
            "silent" => assert!(message.contains("did not start within 0.5 s"), "{message}"),
            other => panic!("{other}"),
        }
    }
    assert!(
        hub.servers()
            .iter()
            .all(|s| matches!(s.state, ServerState::Down(_)))
    );
}

// A hostile server (`tests/mcp/hostile_server.py`) through the real binary: whatever it sends,
// livetalk stays small, its log stays small, the bound hit is named, and the session goes on.

/// The bounds every hostile case is held to.
const PEAK_MIB: f64 = 150.0;
const LOG_BYTES: u64 = 1 << 20;

/// What a session with the hostile server came to.
struct Hostile {
    events: Vec<Value>,
    /// livetalk's peak memory over the whole run.
    peak_mib: f64,
    /// The log's size at the end (the log starts empty).
    log_bytes: u64,
    /// From the start to the notice the test waited for.
    to_notice: Duration,
    scratch: tempfile::TempDir,
}

impl Hostile {
    fn notices(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter(|e| e["type"] == "notice")
            .filter_map(|e| e["text"].as_str())
            .collect()
    }

    fn echo_answered(&self) -> bool {
        tool_events(&self.events)
            .iter()
            .any(|c| c["name"] == "echo" && answer(c)["result"] == "Echo: hello")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.path().join("data/livetalk/livetalk.log"))
            .unwrap_or_default()
    }

    /// The bounds every case is held to, and that the session went on.
    fn assert_bounded(&self, mode: &str) {
        println!(
            "{mode}: peak {:.1} MiB, log {} bytes, notice after {:.2} s",
            self.peak_mib,
            self.log_bytes,
            self.to_notice.as_secs_f64()
        );
        assert!(
            self.peak_mib < PEAK_MIB,
            "{mode}: livetalk peaked at {:.1} MiB",
            self.peak_mib
        );
        assert!(
            self.log_bytes < LOG_BYTES,
            "{mode}: the log grew to {} bytes",
            self.log_bytes
        );
        assert!(
            self.events.iter().any(|e| e["type"] == "model"),
            "{mode}: the turn was answered: {:#?}",
            self.events
        );
    }
}

/// `livetalk --headless --json` (the offline demo model) with the hostile server in `mode`:
/// waits for a notice satisfying `notice`, asks for echo, waits for the model's reply, reads
/// livetalk's peak memory, then ends the session by closing its stdin.
fn hostile_session(mode: &str, extra: &[&str], notice: impl Fn(&str) -> bool) -> Hostile {
    let stdio = format!(
        "command = {python:?}\nargs = [{script:?}, {mode:?}]",
        python = python().display().to_string(),
        script = hostile_script().display().to_string(),
    );
    hostile_session_with(mode, &stdio, extra, notice)
}

fn hostile_script() -> PathBuf {
    root().join("tests/mcp/hostile_server.py")
}

/// [`hostile_session`] with the server reached as `transport` says (its lines in
/// `[mcp_servers.hostile]`).
fn hostile_session_with(
    mode: &str,
    transport: &str,
    extra: &[&str],
    notice: impl Fn(&str) -> bool,
) -> Hostile {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("config.toml"),
        format!(
            r#"[audio]
enabled = false
[mcp_servers.hostile]
{transport}
startup_timeout_sec = 30
tool_timeout_sec = 30
approval = "never"
"#
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let peak = scratch.path().join("peak");
    let mut child = livetalk_measured(scratch.path(), &peak)
        .args(["--headless", "--json"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = LineWatcher::new(child.stdout.take().unwrap());
    let stderr = read_all(child.stderr.take().unwrap());
    let is_notice = |line: &str| {
        serde_json::from_str::<Value>(line)
            .is_ok_and(|e| e["type"] == "notice" && e["text"].as_str().is_some_and(&notice))
    };
    let (noticed, _) = stdout.wait_for_arrival(Duration::from_secs(60), is_notice);
    let to_notice = noticed - started;
    let mut stdin = child.stdin.take().unwrap();
    write_lines(&mut stdin, &["use the echo tool with message hello"]);
    stdout.wait_for(Duration::from_secs(60), |l| l.contains(r#""type":"model""#));
    drop(stdin);
    let status = wait_exit(child, Duration::from_secs(30));
    let stderr = stderr.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "{mode}: {stderr}");
    assert!(!stderr.contains("panicked"), "{mode}: {stderr}");
    let events = stdout
        .rest()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let peak_mib = peak_mib(&peak);
    // The log starts empty and stays far below its cap, so it is never moved aside here.
    let log_bytes = log_bytes(scratch.path());
    Hostile {
        events,
        peak_mib,
        log_bytes,
        to_notice,
        scratch,
    }
}

#[test]
fn schemas_that_fan_out_or_weigh_too_much_leave_their_tool_out_and_the_rest_goes_on() {
    // Five properties a level, twelve levels of `$ref`: 2.6 KB that inlines into millions.
    let fan_out = hostile_session("fanout", &[], |t| t.contains("left out"));
    fan_out.assert_bounded("fanout");
    assert!(
        fan_out.notices().contains(
            &"MCP server hostile: 1 tool left out: deep (its argument schema would take more than 10000 parts once its `$ref`s are inlined)."
        ),
        "{:#?}",
        fan_out.notices()
    );
    assert!(fan_out.echo_answered(), "{:#?}", fan_out.events);
    // 60,000 properties: refused before any work.
    let heavy = hostile_session("heavy", &[], |t| t.contains("left out"));
    heavy.assert_bounded("heavy");
    assert!(
        heavy.notices().iter().any(|n| n.contains(
            "1 tool left out: heavy (its argument schema is too large to read (more than 50000 parts"
        )),
        "{:#?}",
        heavy.notices()
    );
    assert!(heavy.echo_answered(), "{:#?}", heavy.events);
}

#[test]
fn a_hundred_thousand_tools_or_pages_without_end_are_listed_within_bounds() {
    // 100,000 tools in pages of 1,000: the first 512 are kept, and no page past them is asked.
    let many = hostile_session("many", &[], |t| t.contains("512 tools"));
    many.assert_bounded("many");
    assert!(
        many.notices()
            .contains(&"MCP server hostile is up with 512 tools."),
        "{:#?}",
        many.notices()
    );
    assert!(
        many.notices().contains(
            &"MCP server hostile: it offers more than 512 tools; the first 512 are declared."
        ),
        "{:#?}",
        many.notices()
    );
    assert!(many.echo_answered(), "{:#?}", many.events);
    // Every page has a `nextCursor`, from the first listing on.
    let endless = |t: &str| t.contains("went on past 100 pages");
    let pages = hostile_session("pages", &[], endless);
    pages.assert_bounded("pages");
    assert!(pages.echo_answered(), "{:#?}", pages.events);
    // Only once the tool list changed: relisting has the same bounds.
    let relist = hostile_session("relist", &[], endless);
    relist.assert_bounded("relist");
    assert!(
        relist
            .notices()
            .contains(&"MCP server hostile is up with 1 tool."),
        "the first listing was plain: {:#?}",
        relist.notices()
    );
    assert!(relist.echo_answered(), "{:#?}", relist.events);
}

#[test]
fn a_message_larger_than_livetalk_reads_is_dropped_and_named() {
    // A 5 MB schema, and 100,000 tools in one 5 MB page: the MCP library would take
    // 150-220 MB to read either.
    for mode in ["huge", "bigpage"] {
        let run = hostile_session(mode, &[], |t| t.contains("could not be started"));
        run.assert_bounded(mode);
        assert!(
            run.notices().iter().any(|n| n.contains(
                "listing its tools failed: its answer to tools/list was larger than 2 MiB, the most livetalk reads in one message"
            )),
            "{mode}: {:#?}",
            run.notices()
        );
        // Long before its 30 s startup deadline.
        assert!(run.to_notice < Duration::from_secs(20), "{mode}");
    }
}

#[test]
fn a_storm_of_tool_list_changes_is_one_listing_and_one_notice() {
    // 2,000 `tools/list_changed`, and a list that differs at every listing.
    let storm = hostile_session("storm", &[], |t| t.contains("changed its tools"));
    storm.assert_bounded("storm");
    let changed = storm
        .notices()
        .iter()
        .filter(|n| n.contains("changed its tools"))
        .count();
    assert!(changed <= 2, "{:#?}", storm.notices());
    assert!(storm.echo_answered(), "{:#?}", storm.events);
    assert!(
        storm
            .log()
            .contains("tool-list changes announced; listing once"),
        "{}",
        storm.log()
    );
}

#[test]
fn a_progress_flood_is_merged_before_the_screen_the_recording_and_the_log() {
    let record = tempfile::tempdir().unwrap();
    let dir = record.path().join("flood");
    let dir_arg = dir.display().to_string();
    // The call sends progress and log notifications flat out for 6 s before it answers (past
    // the 5 s window livetalk counts them in).
    let run = hostile_session("progress", &["--record", &dir_arg], |t| {
        t.contains("is up with")
    });
    run.assert_bounded("progress");
    assert!(run.echo_answered(), "{:#?}", run.events);
    let session = std::fs::read_to_string(dir.join("session.jsonl")).unwrap();
    let progress = session
        .lines()
        .filter(|l| l.contains(r#""progress":{"#))
        .count();
    println!(
        "progress: {progress} reports recorded, recording {} bytes",
        session.len()
    );
    // About ten a second for six seconds.
    assert!(
        (10..=80).contains(&progress),
        "{progress} progress reports recorded"
    );
    assert!(session.len() < 1 << 20, "{} bytes recorded", session.len());
    let log = run.log();
    assert!(
        log.contains("progress notifications in"),
        "the flood is counted in the log: {log}"
    );
    assert!(!log.contains("received notification"), "{log}");
}

#[test]
fn a_stderr_flood_without_newlines_or_utf8_is_drained_cut_and_capped() {
    // Hundreds of MB without a newline (with bytes that are not UTF-8), then short lines flat
    // out; echo answers once the flood is over, so its answer shows the server outlived it
    // (a closed stderr would have killed it by SIGPIPE).
    let run = hostile_session("stderr", &[], |t| t.contains("is up with"));
    run.assert_bounded("stderr");
    assert!(run.echo_answered(), "{:#?}", run.events);
    let log = run.log();
    assert!(
        log.contains("more bytes of this line not kept"),
        "long lines are cut: {}",
        bounded_tail(&log)
    );
    assert!(
        log.contains("\u{fffd}\u{fffd} not UTF-8"),
        "decoded lossily: {}",
        bounded_tail(&log)
    );
    assert!(
        log.contains("stderr: short line 1 "),
        "{}",
        bounded_tail(&log)
    );
}

/// The hostile server over streamable HTTP, in `mode`, until dropped.
struct HostileHttp {
    child: Child,
    url: String,
}

impl HostileHttp {
    fn start(mode: &str) -> HostileHttp {
        let mut child = Command::new(python())
            .arg(hostile_script())
            .args([mode, "http"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = LineWatcher::new(child.stdout.take().unwrap());
        let line = stdout.wait_for(Duration::from_secs(30), |l| l.starts_with("listening on "));
        let port = line.trim_start_matches("listening on ");
        HostileHttp {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HostileHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_over_http_is_held_to_the_same_bounds() {
    let huge = HostileHttp::start("huge");
    let url = format!("url = {:?}", huge.url);
    let run = hostile_session_with("huge", &url, &[], |t| t.contains("could not be started"));
    run.assert_bounded("huge over HTTP");
    assert!(
        run.notices()
            .iter()
            .any(|n| n.contains("listing its tools failed: its answer to tools/list was larger than 2 MiB, the most livetalk reads in one message")),
        "{:#?}",
        run.notices()
    );
    let many = HostileHttp::start("many");
    let url = format!("url = {:?}", many.url);
    let run = hostile_session_with("many", &url, &[], |t| t.contains("512 tools"));
    run.assert_bounded("many over HTTP");
    assert!(run.echo_answered(), "{:#?}", run.events);
}

/// The end of a long text, for an assertion's message.
fn bounded_tail(text: &str) -> &str {
    let cut = text.len().saturating_sub(4000);
    let cut = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[cut..]
}
