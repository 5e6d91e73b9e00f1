//! The headless real-time audio rig: a private PulseAudio server per test with two null sinks,
//! `spk` (the virtual speaker, recorded from its monitor) and `mic` (played into; its monitor
//! is the virtual microphone). Real-time pacing comes from the null sinks' clocks.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct PulseRig {
    dir: tempfile::TempDir,
    server: Child,
    /// `unix:<socket>`, for PULSE_SERVER.
    pub address: String,
    /// Whether clients are given a cookie (see [`PulseRig::start_without_cookie`]).
    cookie: bool,
}

/// Rate the speaker is recorded at.
pub const RECORD_RATE: u32 = 24_000;

impl PulseRig {
    /// Starts the server and waits (up to 20 s) until it answers; clients get a cookie.
    pub fn start() -> PulseRig {
        PulseRig::launch(true)
    }

    /// As [`PulseRig::start`], but no client finds a cookie anywhere it looks, nor can create
    /// one (libpulse writes a fresh one where it is missing): the containers and WSLg case,
    /// where the server lets clients in anonymously.
    pub fn start_without_cookie() -> PulseRig {
        PulseRig::launch(false)
    }

    fn launch(cookie: bool) -> PulseRig {
        for tool in ["pulseaudio", "pactl", "paplay", "parec"] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success()),
                "{tool} is missing: the audio rig needs `pulseaudio pulseaudio-utils` (scripts/test.sh installs them)"
            );
        }
        let dir = tempfile::tempdir().expect("rig dir");
        let runtime = dir.path().join("rt");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let socket = runtime.join("native");
        if cookie {
            std::fs::write(dir.path().join("cookie"), [7u8; 256]).unwrap();
        } else {
            // A file, so that nothing can be created under it.
            std::fs::write(dir.path().join("not-a-dir"), "").unwrap();
        }
        let server = Command::new("pulseaudio")
            .args([
                "-n",
                "--daemonize=no",
                "--exit-idle-time=-1",
                "--use-pid-file=no",
                "--system=false",
                "--log-target=stderr",
                "-L",
                &format!(
                    "module-native-protocol-unix socket={} auth-anonymous=1",
                    socket.display()
                ),
                "-L",
                "module-null-sink sink_name=spk rate=48000 channels=2",
                "-L",
                "module-null-sink sink_name=mic rate=48000 channels=1",
            ])
            .env("HOME", dir.path().join("home"))
            .env("PULSE_RUNTIME_PATH", &runtime)
            .env("PULSE_STATE_PATH", dir.path().join("state"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pulseaudio");
        let rig = PulseRig {
            address: format!("unix:{}", socket.display()),
            dir,
            server,
            cookie,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = rig
                .command("pactl")
                .arg("info")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "PulseAudio did not start in 20 s"
            );
            // Polling the server's readiness; pactl itself waits on the socket.
            std::thread::sleep(Duration::from_millis(50));
        }
        rig
    }

    /// A command talking to this server.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        self.apply(&mut command);
        command
    }

    /// Points `command` at this server.
    pub fn apply(&self, command: &mut Command) {
        command
            .env("PULSE_SERVER", &self.address)
            .env("PULSE_RUNTIME_PATH", self.dir.path().join("rt"));
        if self.cookie {
            command.env("PULSE_COOKIE", self.dir.path().join("cookie"));
        } else {
            // Clients look at $PULSE_COOKIE, then under $HOME: neither can exist.
            let nowhere = self.dir.path().join("not-a-dir");
            command
                .env("PULSE_COOKIE", nowhere.join("cookie"))
                .env("HOME", nowhere.join("home"));
        }
    }

    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// Plays a WAV into the virtual microphone, in real time; wait on the child for its end.
    pub fn play_into_mic(&self, wav: &Path) -> Child {
        self.command("paplay")
            .args(["--device=mic", "--latency-msec=20"])
            .arg(wav)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("paplay")
    }

    /// Records the virtual speaker (24 kHz mono) from now on.
    pub fn record_speaker(&self) -> SpeakerRecording {
        let mut child = self
            .command("parec")
            .args([
                "--device=spk.monitor",
                "--rate=24000",
                "--channels=1",
                "--format=s16le",
                "--latency-msec=10",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("parec");
        let mut stdout = child.stdout.take().unwrap();
        let samples = Arc::new(Mutex::new(Vec::<i16>::new()));
        let sink = samples.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut carry: Option<u8> = None;
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut bytes: Vec<u8> = carry.take().into_iter().collect();
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() % 2 == 1 {
                    carry = bytes.pop();
                }
                let mut out = sink.lock().unwrap();
                out.extend(
                    bytes
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]])),
                );
            }
        });
        SpeakerRecording {
            child,
            samples,
            reader: Some(reader),
        }
    }
}

impl Drop for PulseRig {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// What the virtual speaker played, as it is recorded.
pub struct SpeakerRecording {
    child: Child,
    samples: Arc<Mutex<Vec<i16>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl SpeakerRecording {
    /// Samples so far.
    pub fn len(&self) -> usize {
        self.samples.lock().unwrap().len()
    }

    /// Waits until at least `seconds` more of audio has been recorded (real time passes).
    pub fn wait_for_more(&self, seconds: f64) {
        let target = self.len() + (seconds * f64::from(RECORD_RATE)) as usize;
        let deadline = Instant::now() + Duration::from_secs_f64(seconds * 3.0 + 5.0);
        while self.len() < target {
            assert!(Instant::now() < deadline, "the speaker recording stalled");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops recording and returns everything recorded, as `f32`.
    pub fn stop(mut self) -> Vec<f32> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.samples
            .lock()
            .unwrap()
            .iter()
            .map(|&s| f32::from(s) / 32_768.0)
            .collect()
    }
}

/// Speech synthesised by espeak-ng into a WAV file.
pub fn spoken_phrase(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("phrase.wav");
    let status = Command::new("espeak-ng")
        .args(["-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng (scripts/test.sh installs it)");
    assert!(status.success(), "espeak-ng failed");
    path
}

/// Root-mean-square level of 10 ms windows: where sound is.
pub fn loud_windows(samples: &[f32], rate: u32, threshold: f32) -> Vec<bool> {
    let window = (rate / 100) as usize;
    samples
        .chunks(window)
        .map(|w| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt() > threshold)
        .collect()
}

/// The first and last loud 10 ms windows, in seconds from the start.
pub fn sound_span(samples: &[f32], rate: u32, threshold: f32) -> Option<(f64, f64)> {
    let loud = loud_windows(samples, rate, threshold);
    let first = loud.iter().position(|&l| l)?;
    let last = loud.iter().rposition(|&l| l)?;
    Some((first as f64 / 100.0, (last + 1) as f64 / 100.0))
}

/// Frequency of a clean tone by rising zero crossings.
pub fn tone_frequency(samples: &[f32], rate: u32) -> f64 {
    let crossings = samples
        .windows(2)
        .filter(|w| w[0] < 0.0 && w[1] >= 0.0)
        .count();
    crossings as f64 * f64::from(rate) / samples.len() as f64
}

/// The best normalised cross-correlation of `reference` inside `signal`, searching lags
/// around `near` (± `span` samples).
pub fn best_correlation(signal: &[f32], reference: &[f32], near: usize, span: usize) -> f64 {
    let energy = |x: &[f32]| x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>();
    let ref_energy = energy(reference);
    let mut best = 0.0f64;
    for lag in near.saturating_sub(span)..=near + span {
        if lag + reference.len() > signal.len() {
            break;
        }
        let window = &signal[lag..lag + reference.len()];
        let dot: f64 = window
            .iter()
            .zip(reference)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        let norm = (energy(window) * ref_energy).sqrt();
        if norm > 0.0 {
            best = best.max(dot / norm);
        }
    }
    best
}
