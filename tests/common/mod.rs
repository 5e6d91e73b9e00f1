//! Shared helpers for integration tests: run the livetalk binary with a clean environment,
//! feed stdin, and wait on its output and exit with timeouts (never blind sleeps).

#![allow(dead_code)]

pub mod display;
pub mod graphics;
pub mod harness;
pub mod pane;
pub mod rig;
pub mod ws;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The three user turns of the smart-home dialogue.
pub const SMART_HOME_LINES: [&str; 3] = [
    "Is the living room lamp on?",
    "Okay, please turn it on and set its color to blue.",
    "What's the kitchen thermostat set to?",
];

/// A mock fault scenario: the model's first reply is cut off once it has started to speak (so
/// the cut shows), and the connection drops when the second question arrives: the link
/// reconnects, resumes and sends that question again.
pub const INTERRUPT_AND_RECONNECT: &str = r#"
[[fault]]
at = "reply_text"
nth = 1
action = "interrupt"

[[fault]]
at = "user_turn"
nth = 2
action = "drop"
"#;

/// A local test CA in `dir` (`ca.pem`) and a server certificate it signed for localhost and
/// 127.0.0.1 (`leaf.pem`, key `leaf.key`), made by the openssl command (`scripts/test.sh`
/// installs it). rustls takes no self-signed server certificate, so a CA it is.
pub fn test_ca(dir: &Path) {
    std::fs::create_dir_all(dir).expect("make the CA's folder");
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write the certificate's extensions");
    openssl(
        dir,
        &[
            "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=livetalk-test-CA",
            "req -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr -subj /CN=localhost",
            "x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem -days 2 -extfile ext.cnf",
        ],
    );
}

/// Runs `openssl` in `dir` once for each of `steps` (its arguments, split at spaces), failing
/// the test with openssl's own words at the first step that fails.
pub fn openssl(dir: &Path, steps: &[&str]) {
    for args in steps {
        let output = Command::new("openssl")
            .args(args.split(' '))
            .current_dir(dir)
            .output()
            .expect("openssl runs (scripts/test.sh installs it)");
        assert!(
            output.status.success(),
            "openssl {args}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A `livetalk` command with an isolated config, data dir and no API key.
pub fn livetalk(scratch: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_livetalk"));
    isolate(&mut command, scratch);
    command
}

/// [`livetalk`], inheriting nothing from this environment but PATH: what it starts (an MCP
/// server) then holds little besides what the config gives it.
pub fn livetalk_with_only_path(scratch: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_livetalk"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    isolate(&mut command, scratch);
    command
}

/// [`livetalk`] started by a shell that first limits it to `limit` open file descriptors
/// (the limit is the server's alone, not the test's); its arguments follow as usual.
pub fn livetalk_with_fd_limit(scratch: &Path, limit: u32) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_livetalk"));
    isolate(&mut command, scratch);
    command
}

/// What the machine's environment could route, trust or authenticate differently: removed so
/// loopback tests never go through a proxy or credentials the test machine happens to have.
/// A test that wants one sets it after `isolate`.
pub const NETWORK_VARS: [&str; 14] = [
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "CLOUDSDK_CONFIG",
];

/// Gives `command` (and what it starts) an isolated config, data dir, no API key, no proxy
/// and no cloud credentials.
pub fn isolate(command: &mut Command, scratch: &Path) {
    let config = scratch.join("config.toml");
    if !config.exists() {
        // Text only unless a test asks for audio: results must not depend on the machine's
        // sound devices (the audio tests bring their own PulseAudio server).
        std::fs::write(&config, "[audio]\nenabled = false\n").expect("write the test config");
    }
    command
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("LIVETALK_ENDPOINT")
        .env_remove("LIVETALK_MODEL")
        .env_remove("LIVETALK_VOICE")
        .env_remove("LIVETALK_API_VERSION")
        .env_remove("LIVETALK_AUDIO_HOST")
        .env_remove("LIVETALK_BRIDGE_TRANSPORT")
        .env("LIVETALK_CONFIG", &config)
        .env("HOME", scratch)
        .env("XDG_DATA_HOME", scratch.join("data"))
        .env("XDG_CONFIG_HOME", scratch.join("config"));
    for var in NETWORK_VARS {
        command.env_remove(var);
    }
}

/// Runs its arguments as a child, then writes the child's peak resident memory (KiB, from
/// `getrusage`, so the moment before exit counts too) to the file named first; exits as the
/// child did.
const PEAK_MEMORY_PARENT: &str = "import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code if code >= 0 else 128 - code)";

/// [`livetalk`] with its peak memory measured: run under a small Python parent that, once
/// livetalk has exited, writes its peak resident memory to `peak_file` (read it with
/// [`peak_mib`]). The exit code is livetalk's.
pub fn livetalk_measured(scratch: &Path, peak_file: &Path) -> Command {
    let mut command = Command::new("python3");
    command
        .arg("-c")
        .arg(PEAK_MEMORY_PARENT)
        .arg(peak_file)
        .arg(env!("CARGO_BIN_EXE_livetalk"));
    isolate(&mut command, scratch);
    command
}

/// The peak resident memory, in MiB, a [`livetalk_measured`] run wrote to `peak_file`.
pub fn peak_mib(peak_file: &Path) -> f64 {
    let text = std::fs::read_to_string(peak_file).expect("the measured run wrote its peak");
    text.trim().parse::<f64>().expect("a number of KiB") / 1024.0
}

/// The size of livetalk's log file under an isolated `scratch` (0 when there is none).
pub fn log_bytes(scratch: &Path) -> u64 {
    std::fs::metadata(scratch.join("data").join("livetalk").join("livetalk.log"))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// How many clock ticks a second `/proc/PID/stat` counts CPU time in.
pub fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// A loopback port nothing listens on (bound, then let go): a refused connection, or a port
/// for a child to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A FIFO at `path` that nobody writes to: reading it waits for ever.
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A file of `bytes` zero bytes at `path`, made sparse (nothing is written).
pub fn sparse_file(path: &Path, bytes: u64) {
    std::fs::File::create(path)
        .and_then(|file| file.set_len(bytes))
        .expect("make a sparse file");
}

/// A `width`×`height` PNG of one colour at `path`, written with the image crate.
pub fn png_file(path: &Path, width: u32, height: u32, rgb: [u8; 3]) {
    image::RgbImage::from_pixel(width, height, image::Rgb(rgb))
        .save_with_format(path, image::ImageFormat::Png)
        .expect("write a PNG");
}

/// A PNG whose header claims `width`×`height` pixels (a decompression bomb's start): a valid
/// signature and header chunk, a few bytes of image data, an end.
pub fn png_claiming(path: &Path, width: u32, height: u32) {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    // 8-bit RGB, deflate, no filter, no interlace.
    header.extend([8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    chunk(
        &mut png,
        b"IDAT",
        &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    );
    chunk(&mut png, b"IEND", &[]);
    std::fs::write(path, png).expect("write the PNG header");
}

/// The lines of a recording's `session.jsonl`, parsed.
pub fn recording_lines(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("session.jsonl"))
        .expect("the recording's session.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The messages a recording says livetalk sent (its `send` lines).
pub fn sent_messages(dir: &Path) -> Vec<serde_json::Value> {
    recording_lines(dir)
        .into_iter()
        .filter(|l| l["type"] == "send")
        .map(|l| l["message"].clone())
        .collect()
}

/// A running `livetalk mock` and the base URL it printed.
pub struct MockProcess {
    pub child: Child,
    pub url: String,
    /// Its stdout, the URL line seen.
    pub stdout: LineWatcher,
}

impl MockProcess {
    pub fn start(scratch: &Path, extra: &[&str]) -> MockProcess {
        let mut child = livetalk(scratch)
            .args(["mock", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn livetalk mock");
        let mut stdout = LineWatcher::new(child.stdout.take().expect("mock stdout"));
        let url = stdout.wait_for_url(Duration::from_secs(20));
        MockProcess { child, url, stdout }
    }
}

impl Drop for MockProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The embedded mock in this test's own process (on a runtime of its own), for a test that
/// runs the livetalk binary against it and then asks the server what it received
/// ([`livetalk_mock::MockState`]): what a Live server got, not what livetalk says it sent.
pub struct InProcessMock {
    pub server: livetalk_mock::MockServer,
    /// `ws://127.0.0.1:PORT`, for `--endpoint`.
    pub url: String,
    _runtime: tokio::runtime::Runtime,
}

impl InProcessMock {
    /// Starts the mock on a free loopback port, replying 20× faster than real time.
    pub fn start() -> InProcessMock {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the mock");
        let server = runtime
            .block_on(livetalk_mock::MockServer::start(
                livetalk_mock::MockOptions {
                    speed: 20.0,
                    ..livetalk_mock::MockOptions::loopback()
                },
            ))
            .expect("the mock starts");
        InProcessMock {
            url: server.base_url(),
            server,
            _runtime: runtime,
        }
    }

    /// The pictures the server received so far (`realtimeInput.video`), in order.
    pub fn pictures(&self) -> Vec<livetalk_mock::PictureReceived> {
        self.server.state().pictures()
    }
}

/// Checks `ready` every `every` until it gives a value, or gives `None` once `timeout` has
/// passed: for what no event announces (a screen, a file, another process's state).
pub fn poll<T>(
    timeout: Duration,
    every: Duration,
    mut ready: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// [`poll`] inside the runtime, where a blocking sleep would hold up a worker thread.
pub async fn poll_async<T>(
    timeout: Duration,
    every: Duration,
    mut ready: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = ready().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// Collects a child's output lines as they come, each with when it arrived, so tests can
/// wait for one.
pub struct LineWatcher {
    lines: mpsc::Receiver<(Instant, String)>,
    pub seen: Vec<String>,
}

impl LineWatcher {
    pub fn new(stream: impl std::io::Read + Send + 'static) -> LineWatcher {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        LineWatcher::from_channel(rx)
    }

    /// Watches lines that a reader of its own passes on (one that also counts or bounds them).
    pub fn from_channel(lines: mpsc::Receiver<(Instant, String)>) -> LineWatcher {
        LineWatcher {
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits until a line satisfies `pred`; panics with everything seen after `timeout`.
    pub fn wait_for(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        self.wait_for_arrival(timeout, pred).1
    }

    /// [`LineWatcher::wait_for`], with when the line arrived (taken as it was read, so it
    /// does not depend on when the test looks).
    pub fn wait_for_arrival(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> (Instant, String) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return (at, line);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "timed out after {timeout:?}; lines so far: {:#?}",
                        self.seen
                    )
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the output ended; lines so far: {:#?}", self.seen)
                }
            }
        }
    }

    /// Waits for the `ws://` or `wss://` URL a server prints when it listens.
    pub fn wait_for_url(&mut self, timeout: Duration) -> String {
        let line = self.wait_for(timeout, |l| url_in(l).is_some());
        url_in(&line).expect("the line has a URL").to_owned()
    }

    /// The lines that have arrived by now, without waiting; they count as seen.
    pub fn arrived(&mut self) -> Vec<String> {
        let lines: Vec<String> = self.lines.try_iter().map(|(_, line)| line).collect();
        self.seen.extend(lines.iter().cloned());
        lines
    }

    /// Every line, seen or still to come, once the output has ended.
    pub fn rest(mut self) -> Vec<String> {
        self.seen.extend(self.lines.iter().map(|(_, line)| line));
        self.seen
    }
}

/// The first WebSocket URL in `line`.
fn url_in(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find(|w| w.starts_with("ws://") || w.starts_with("wss://"))
}

/// Sends `signal` (`TERM`, `INT`, …) to process `pid`, as a user would with `kill`.
pub fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Waits for a child to exit (an event on a waiter thread), killing it after `timeout`.
pub fn wait_exit(mut child: Child, timeout: Duration) -> ExitStatus {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(timeout) {
        Ok(status) => status.expect("wait for child"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("process {pid} did not exit within {timeout:?}");
        }
    }
}

/// What a finished run printed and how it exited.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `livetalk ARGS` with `lines` on stdin (then closed) and waits for it to exit.
pub fn run_livetalk(scratch: &Path, args: &[&str], envs: &[(&str, &str)], lines: &[&str]) -> Run {
    let mut command = livetalk(scratch);
    command.args(args).envs(envs.iter().copied());
    run_command(command, lines, Duration::from_secs(60))
}

/// Runs `command` with `lines` on stdin (then closed) and waits up to `timeout` for it to
/// exit, with everything it printed.
pub fn run_command(mut command: Command, lines: &[&str], timeout: Duration) -> Run {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn livetalk");
    let mut stdin = child.stdin.take().expect("stdin");
    write_lines(&mut stdin, lines);
    drop(stdin);
    let stdout = read_all(child.stdout.take().expect("stdout"));
    let stderr = read_all(child.stderr.take().expect("stderr"));
    let status = wait_exit(child, timeout);
    Run {
        code: status.code(),
        stdout: stdout
            .recv_timeout(Duration::from_secs(5))
            .expect("stdout closes"),
        stderr: stderr
            .recv_timeout(Duration::from_secs(5))
            .expect("stderr closes"),
    }
}

pub fn write_lines(stdin: &mut ChildStdin, lines: &[&str]) {
    for line in lines {
        writeln!(stdin, "{line}").expect("write stdin");
    }
    stdin.flush().expect("flush stdin");
}

/// Reads all of a stream on a thread; the result is available once the stream closes.
pub fn read_all(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(stream).read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx
}

use std::io::Read as _;

/// The headless output of the three-turn smart-home dialogue: three user lines, each followed
/// by its tool call (with the expected arguments and results) and a reply that reflects it.
pub fn assert_smart_home_dialogue(stdout: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    let you: Vec<_> = lines.iter().filter(|l| l.starts_with("You: ")).collect();
    let tools: Vec<_> = lines.iter().filter(|l| l.starts_with("Tool: ")).collect();
    let replies: Vec<_> = lines.iter().filter(|l| l.starts_with("Gemini: ")).collect();
    assert_eq!(you.len(), 3, "{stdout}");
    assert_eq!(tools.len(), 3, "{stdout}");
    assert_eq!(replies.len(), 3, "{stdout}");

    assert!(
        tools[0]
            .starts_with("Tool: get_device_status {\"device_name\":\"living room lamp\"} -> ok"),
        "{}",
        tools[0]
    );
    assert!(tools[0].contains("\"status\":\"off\""), "{}", tools[0]);
    assert!(
        tools[1].starts_with("Tool: set_device_status "),
        "{}",
        tools[1]
    );
    assert!(
        tools[1].contains("\"new_status\":\"on\"") && tools[1].contains("\"color\":\"blue\""),
        "{}",
        tools[1]
    );
    assert!(
        tools[2].contains("kitchen thermostat") && tools[2].contains("\"temperature_celsius\":20"),
        "{}",
        tools[2]
    );

    assert!(replies[0].contains("off"), "{}", replies[0]);
    assert!(
        replies[1].contains("on") && replies[1].contains("blue"),
        "{}",
        replies[1]
    );
    assert!(replies[2].contains("20"), "{}", replies[2]);

    // Order: each user line, then its tool call, then the reply.
    let position = |needle: &str| lines.iter().position(|l| l == &needle).unwrap();
    assert!(position(you[0]) < position(tools[0]) && position(tools[0]) < position(replies[0]));
    assert!(position(replies[0]) < position(you[1]));
}

/// Records the smart-home dialogue against a mock process running [`INTERRUPT_AND_RECONNECT`]
/// (tool calls, an interrupted reply, a reconnect) into `<scratch>/rec`; returns the run, the
/// folder and the mock (drop it to take the network away).
pub fn record_interrupted_session(
    scratch: &Path,
    envs: &[(&str, &str)],
) -> (Run, std::path::PathBuf, MockProcess) {
    let scenario = scratch.join("faults.toml");
    std::fs::write(&scenario, INTERRUPT_AND_RECONNECT).expect("write the scenario");
    let mock = MockProcess::start(
        scratch,
        &[
            "--speed",
            "20",
            "--scenario",
            scenario.to_str().expect("UTF-8 path"),
        ],
    );
    let dir = scratch.join("rec");
    let dir_arg = dir.to_str().expect("UTF-8 path");
    let run = run_livetalk(
        scratch,
        &["--headless", "--endpoint", &mock.url, "--record", dir_arg],
        envs,
        &SMART_HOME_LINES,
    );
    (run, dir, mock)
}

/// A drawn screen as text, one line per row.
pub fn screen_text(buffer: &ratatui::buffer::Buffer) -> String {
    let width = usize::from(buffer.area.width);
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|cell| cell.symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// PCM16 16 kHz mono that the mock's voice detection takes for speech: a loud 220 Hz tone
/// for `tone_ms`, then `silence_ms` of silence.
pub fn speech_pcm(tone_ms: usize, silence_ms: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..(16 * tone_ms) {
        let sample =
            ((i as f64 * 220.0 * std::f64::consts::TAU / 16_000.0).sin() * 12_000.0) as i16;
        bytes.extend_from_slice(&sample.to_le_bytes());
    }
    bytes.resize(bytes.len() + 32 * silence_ms, 0);
    bytes
}

/// The model's replies in the app's history, as shown: readable text and how each ended.
pub fn replies(app: &livetalk::app::App) -> Vec<(String, livetalk::app::ModelTurnStatus)> {
    use livetalk::app::Entry;
    app.transcript()
        .iter()
        .filter_map(|e| match e {
            Entry::Model {
                text_parts,
                transcript,
                status,
                ..
            } => Some((Entry::model_text(text_parts, transcript), *status)),
            _ => None,
        })
        .collect()
}

/// No secret in what the run printed, nor in any file it wrote under `scratch` (the log,
/// recordings), apart from the files the test itself wrote them into.
pub fn assert_no_secrets(run: &Run, scratch: &Path, secrets: &[&str], written_by_test: &[&Path]) {
    for secret in secrets {
        assert!(
            !run.stdout.contains(secret),
            "{secret} on stdout:\n{}",
            run.stdout
        );
        assert!(
            !run.stderr.contains(secret),
            "{secret} on stderr:\n{}",
            run.stderr
        );
    }
    let mut folders = vec![scratch.to_owned()];
    let mut files = 0;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if !written_by_test.iter().any(|w| path.starts_with(w)) {
                files += 1;
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                for secret in secrets {
                    assert!(!text.contains(secret), "{secret} in {}", path.display());
                }
            }
        }
    }
    assert!(files > 0, "the run wrote a log to search");
}

/// One plain HTTP request to `addr` (`host:port`), answered with its status and body: for a
/// server's routes beside its WebSocket (`/healthz`, `/metrics`, …) and other servers' pages.
/// The connection closes after the answer, so the body is what was read to the end.
pub async fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    http_if_up(addr, method, path, headers)
        .await
        .unwrap_or_else(|| panic!("nothing answers HTTP at {addr}"))
}

/// [`http`], or `None` when nothing listens at `addr` (yet): for polling a server starting.
pub async fn http_if_up(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    // HTTP/1.0: the answer comes whole, never in chunks, and the connection closes after it.
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("an HTTP answer within 20 s")
        .ok()?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split(' ').nth(1)?.parse().ok()?;
    let (head, mut body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let mut whole = String::new();
    if chunked {
        // Some servers (HAProxy's statistics) send chunks even to an HTTP/1.0 request.
        while let Some((size, rest)) = body.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            whole.push_str(rest.get(..size)?);
            body = rest.get(size + 2..)?;
        }
    } else {
        whole.push_str(body);
    }
    Some((status, whole))
}

/// The value of one sample of an OpenMetrics exposition (`name{labels} value` as written),
/// or 0 when the sample is not there (a counter never incremented).
pub fn metric(exposition: &str, sample: &str) -> f64 {
    exposition
        .lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == sample).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}
