//! The headless real-time audio rig: a private PulseAudio server per test with two null sinks,
//! `spk` (the virtual speaker, recorded from its monitor) and `mic` (played into; its monitor
//! is the virtual microphone), optionally joined by an acoustic path from the speaker into the
//! microphone. Real-time pacing comes from the null sinks' clocks.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct PulseRig {
    dir: tempfile::TempDir,
    server: Child,
    /// `unix:<socket>`, for PULSE_SERVER.
    pub address: String,
    /// Whether clients are given a cookie (see [`PulseRig::start_without_cookie`]).
    cookie: bool,
    /// The null sinks' sample rate.
    pub rate: u32,
    /// The host [`PulseRig::livetalk`] uses.
    host: RigHost,
}

/// What a rig's server is started with.
#[derive(Debug, Clone, Copy)]
pub struct RigSetup {
    /// Sample rate of both null sinks.
    pub rate: u32,
    /// Whether clients are given a cookie.
    pub cookie: bool,
    /// A room between speaker and microphone: what the speaker plays reaches the microphone
    /// this much later, at unity gain, mixed with whatever is played into `mic`.
    pub acoustic_delay: Option<Duration>,
    /// The audio host livetalk reaches the rig through.
    pub host: RigHost,
}

/// How livetalk reaches the rig's devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RigHost {
    /// cpal's PulseAudio host.
    PulseAudio,
    /// cpal's ALSA host, through ALSA's PulseAudio plugin (the `pulse` device): the only ALSA
    /// path to a PulseAudio server, and the one desktop Linux without PipeWire uses.
    Alsa,
}

impl Default for RigSetup {
    fn default() -> RigSetup {
        RigSetup {
            rate: 48_000,
            cookie: true,
            acoustic_delay: None,
            host: RigHost::PulseAudio,
        }
    }
}

/// What a player of the rig keeps buffered in the server. With 20 ms a busy machine starved
/// paplay and the server played a phrase with gaps in it (its log: "Implicit underrun of
/// 'phrase.wav'"): the mock heard 1.45-1.50 s of a 1.34 s phrase and its correlation with the
/// phrase fell to 0.47, the rig measuring itself. 200 ms keeps it whole under the same load.
pub const PLAYER_BUFFER: Duration = Duration::from_millis(200);

/// The server's log, in the rig's folder.
const SERVER_LOG: &str = "server.log";

/// Where the server's log stood at some moment: what it says after that is what followed.
#[derive(Debug, Clone, Copy)]
pub struct LogMark(u64);

/// Audio the sound server itself lost, as its own log shows it: the underruns of the players
/// the rig started (a player starved of CPU leaves gaps in what it plays, the phrase heard
/// longer and out of step with itself), and what the room's loopback dropped or padded to
/// re-time itself. livetalk's own streams are not counted: what they lose is livetalk's.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ServerLoss {
    /// Each player that ran dry, with the times it did.
    pub underruns: Vec<(String, usize)>,
    /// Microseconds of audio the loopback dropped, and of silence it added.
    pub loopback_dropped_us: u64,
    pub loopback_padded_us: u64,
}

impl ServerLoss {
    /// True when the server lost any of the rig's audio.
    pub fn any(&self) -> bool {
        !self.underruns.is_empty() || self.loopback_dropped_us + self.loopback_padded_us > 0
    }

    /// Reads what the server's log says from `log` (the text after a mark) of `players`'
    /// streams (their names, as the server logs them: a WAV file's name for paplay).
    pub fn read(log: &str, players: &[&str]) -> ServerLoss {
        let mut loss = ServerLoss::default();
        for line in log.lines() {
            if let Some(name) = line
                .split_once("Implicit underrun of '")
                .and_then(|(_, rest)| rest.strip_suffix('\''))
                .filter(|name| players.contains(name))
            {
                match loss.underruns.iter_mut().find(|(n, _)| n == name) {
                    Some((_, count)) => *count += 1,
                    None => loss.underruns.push((name.to_owned(), 1)),
                }
            }
            let usec = |prefix: &str, suffix: &str| -> Option<u64> {
                line.split_once(prefix)?
                    .1
                    .strip_suffix(suffix)?
                    .parse()
                    .ok()
            };
            if line.contains("module-loopback.c") {
                if let Some(us) = usec("Dropping ", " usec of audio from queue") {
                    loss.loopback_dropped_us += us;
                }
                if let Some(us) = usec("Adding ", " usec of silence to queue") {
                    loss.loopback_padded_us += us;
                }
            }
        }
        loss
    }
}

impl std::fmt::Display for ServerLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.any() {
            return f.write_str("no audio lost");
        }
        let mut parts: Vec<String> = self
            .underruns
            .iter()
            .map(|(name, count)| format!("{name}'s player ran dry {count} time(s)"))
            .collect();
        if self.loopback_dropped_us + self.loopback_padded_us > 0 {
            parts.push(format!(
                "the room's loopback dropped {:.1} ms of audio and added {:.1} ms of silence",
                self.loopback_dropped_us as f64 / 1000.0,
                self.loopback_padded_us as f64 / 1000.0
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// The name the server gives a WAV file's player (paplay's stream is named after the file).
pub fn player_name(wav: &Path) -> String {
    wav.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs `attempt`, which says why it failed; a failed run is repeated once, and only when
/// the sound server's own log shows it lost audio of the rig's (the `players` it names ran
/// dry, or the room's loopback re-timed itself) while it ran: the output says so and by how
/// much. Any other failure, and a second one, fails the test: a timing bar missed with the
/// server whole is livetalk's.
pub fn once_more_if_the_server_lost_audio<T>(
    rig: &PulseRig,
    what: &str,
    players: &[&str],
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let mark = rig.log_mark();
    let why = match attempt() {
        Ok(done) => return done,
        Err(why) => why,
    };
    let loss = rig.server_loss(mark, players);
    assert!(
        loss.any(),
        "{what}: {why} (the sound server's log shows no audio lost of its own: the miss is livetalk's)"
    );
    eprintln!(
        "{what}: {why}; run void: the sound server lost audio while it ran ({loss}); once more"
    );
    let mark = rig.log_mark();
    attempt().unwrap_or_else(|why| {
        panic!(
            "{what}: {why}, again (the sound server's log this time: {})",
            rig.server_loss(mark, players)
        )
    })
}

/// The rig's virtual microphone and speaker, as a client names them.
pub const RIG_DEVICES: (&str, &str) = ("mic.monitor", "spk");

/// The source and sink of the sound server's echo canceller, once loaded
/// ([`PulseRig::load_system_canceller`]).
pub const SYSTEM_CANCELLER_DEVICES: (&str, &str) = ("ec_mic", "ec_spk");

/// Rate the speaker is recorded at.
pub const RECORD_RATE: u32 = 24_000;

impl PulseRig {
    /// Starts the server and waits (up to 20 s) until it answers; clients get a cookie.
    pub fn start() -> PulseRig {
        PulseRig::launch(RigSetup::default())
    }

    /// As [`PulseRig::start`], but no client finds a cookie anywhere it looks, nor can create
    /// one (libpulse writes a fresh one where it is missing): the containers and WSLg case,
    /// where the server lets clients in anonymously.
    pub fn start_without_cookie() -> PulseRig {
        PulseRig::launch(RigSetup {
            cookie: false,
            ..RigSetup::default()
        })
    }

    /// Starts the server as `setup` says and waits (up to 20 s) until it answers.
    pub fn launch(setup: RigSetup) -> PulseRig {
        let RigSetup {
            rate,
            cookie,
            acoustic_delay,
            host,
        } = setup;
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
        let mut modules = vec![
            format!(
                "module-native-protocol-unix socket={} auth-anonymous=1",
                socket.display()
            ),
            format!("module-null-sink sink_name=spk rate={rate} channels=2"),
            format!("module-null-sink sink_name=mic rate={rate} channels=1"),
        ];
        if let Some(delay) = acoustic_delay {
            // adjust_time=0: the loopback never re-tunes its resampler, so the path from speaker
            // to microphone stays one fixed delay, as a room's does (a drifting path would
            // measure the rig, not an echo canceller).
            modules.push(format!(
                "module-loopback source=spk.monitor sink=mic latency_msec={} adjust_time=0",
                delay.as_millis()
            ));
        }
        // The server's log, at the level that names each underrun of a stream and every
        // re-timing of the loopback: what the server itself lost ([`PulseRig::server_loss`]).
        let log = std::fs::File::create(dir.path().join(SERVER_LOG)).expect("the server's log");
        let server = Command::new("pulseaudio")
            .args([
                "-n",
                "--daemonize=no",
                "--exit-idle-time=-1",
                "--use-pid-file=no",
                "--system=false",
                "--log-target=stderr",
                "--log-level=debug",
            ])
            .args(modules.iter().flat_map(|m| ["-L", m.as_str()]))
            .env("HOME", dir.path().join("home"))
            .env("PULSE_RUNTIME_PATH", &runtime)
            .env("PULSE_STATE_PATH", dir.path().join("state"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start pulseaudio");
        let mut rig = PulseRig {
            address: format!("unix:{}", socket.display()),
            dir,
            server,
            cookie,
            rate,
            host,
        };
        // Polling the server's readiness; pactl itself waits on the socket.
        let ready = super::poll(Duration::from_secs(20), Duration::from_millis(50), || {
            let answers = rig
                .command("pactl")
                .arg("info")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if let (false, Ok(Some(status))) = (answers, rig.server.try_wait()) {
                panic!("PulseAudio exited ({status}) at start with the modules {modules:?}");
            }
            answers.then_some(())
        });
        assert!(ready.is_some(), "PulseAudio did not start in 20 s");
        rig
    }

    /// Where the server's log stands now.
    pub fn log_mark(&self) -> LogMark {
        LogMark(
            std::fs::metadata(self.dir.path().join(SERVER_LOG))
                .map(|m| m.len())
                .unwrap_or(0),
        )
    }

    /// What the server's log shows it lost since `mark` of the rig's audio: the `players`
    /// named (see [`player_name`]) and the room's loopback.
    pub fn server_loss(&self, mark: LogMark, players: &[&str]) -> ServerLoss {
        let mut log = String::new();
        if let Ok(mut file) = std::fs::File::open(self.dir.path().join(SERVER_LOG)) {
            use std::io::Seek as _;
            let _ = file.seek(std::io::SeekFrom::Start(mark.0));
            let mut bytes = Vec::new();
            let _ = file.read_to_end(&mut bytes);
            log = String::from_utf8_lossy(&bytes).into_owned();
        }
        ServerLoss::read(&log, players)
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

    /// `livetalk` talking through this rig's virtual mic and speaker on the rig's audio host,
    /// with `scratch`'s config (see [`audio_scratch`]); the caller adds the rest.
    pub fn livetalk(&self, scratch: &Path) -> Command {
        self.livetalk_on(scratch, RIG_DEVICES)
    }

    /// As [`PulseRig::livetalk`], on another source and sink of this server.
    pub fn livetalk_on(&self, scratch: &Path, (source, sink): (&str, &str)) -> Command {
        let mut command = super::livetalk(scratch);
        self.apply(&mut command);
        match self.host {
            RigHost::PulseAudio => command.args([
                "--audio-host",
                "pulseaudio",
                "--input-device",
                source,
                "--output-device",
                sink,
            ]),
            // The plugin's device takes its source and sink from the environment.
            RigHost::Alsa => command
                .env("PULSE_SOURCE", source)
                .env("PULSE_SINK", sink)
                .args([
                    "--audio-host",
                    "alsa",
                    "--input-device",
                    "pulse",
                    "--output-device",
                    "pulse",
                ]),
        };
        command
    }

    /// `livetalk --headless ARGS` on this rig's virtual mic and speaker, all pipes open.
    pub fn headless(&self, scratch: &Path, args: &[&str]) -> Child {
        self.headless_on(scratch, RIG_DEVICES, args)
    }

    /// As [`PulseRig::headless`], on another source and sink of this server.
    pub fn headless_on(&self, scratch: &Path, devices: (&str, &str), args: &[&str]) -> Child {
        self.livetalk_on(scratch, devices)
            .arg("--headless")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn livetalk")
    }

    /// The devices' rate and, when it is not PulseAudio, the host: for figures' labels.
    pub fn label(&self) -> String {
        match self.host {
            RigHost::PulseAudio => format!("{} Hz", self.rate),
            RigHost::Alsa => format!("{} Hz through ALSA", self.rate),
        }
    }

    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// Plays a WAV into the virtual microphone, in real time, whole; wait on the child for
    /// its end. The player keeps [`PLAYER_BUFFER`] of it buffered in the server.
    pub fn play_into_mic(&self, wav: &Path) -> Child {
        self.command("paplay")
            .arg("--device=mic")
            .arg(format!("--latency-msec={}", PLAYER_BUFFER.as_millis()))
            .arg(wav)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("paplay")
    }

    /// Plays a 440 Hz tone into the virtual microphone over and over, through `pacat` asking
    /// the server for `latency`, until the player is dropped; returns once the server lists
    /// the stream. The tone is at espeak-ng's rate, so the server resamples it into the sink,
    /// as it does [`PulseRig::play_into_mic`]'s phrases: with a short latency the microphone's
    /// source then hands its clients audio in pieces smaller than a 10 ms period (at the
    /// sink's own rate it does not).
    pub fn loop_into_mic(&self, latency: Duration) -> LoopedPlayer {
        const NAME: &str = "livetalk-test-loop";
        /// espeak-ng's rate.
        const LOOP_RATE: u32 = 22_050;
        let mut child = self
            .command("pacat")
            .args([
                "--playback",
                "--device=mic",
                "--channels=1",
                "--format=s16le",
            ])
            .arg(format!("--rate={LOOP_RATE}"))
            .arg(format!("--latency-msec={}", latency.as_millis()))
            .arg(format!("--client-name={NAME}"))
            .arg(format!("--stream-name={NAME}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pacat");
        let mut stdin = child.stdin.take().unwrap();
        // One second of the tone, written again and again: pacat takes it at the sink's pace,
        // and the write fails (the pipe is closed) once pacat is gone.
        let second: Vec<u8> = (0..LOOP_RATE)
            .flat_map(|i| {
                let v = 0.3
                    * (std::f64::consts::TAU * 440.0 * f64::from(i) / f64::from(LOOP_RATE)).sin();
                ((v * 32_767.0) as i16).to_le_bytes()
            })
            .collect();
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            while stdin.write_all(&second).is_ok() {}
        });
        let mut player = LoopedPlayer {
            child,
            feeder: Some(feeder),
        };
        let listed = super::poll(Duration::from_secs(20), Duration::from_millis(50), || {
            if let Ok(Some(status)) = player.child.try_wait() {
                panic!("pacat exited ({status}) before it played");
            }
            let out = self
                .command("pactl")
                .args(["list", "sink-inputs"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .contains(&format!("application.name = \"{NAME}\""))
                .then_some(())
        });
        assert!(
            listed.is_some(),
            "the server did not list pacat's stream in 20 s"
        );
        player
    }

    /// Puts the sound server's own echo canceller (`module-echo-cancel`, WebRTC's, with its
    /// defaults) between the rig's devices, until [`PulseRig::unload_module`] is given the
    /// index returned: a client on [`SYSTEM_CANCELLER_DEVICES`] (see
    /// [`PulseRig::livetalk_on`]) hears the microphone with the speaker's echo taken out, as a
    /// desktop user who turned the system's canceller on does.
    pub fn load_system_canceller(&self) -> u32 {
        let (source, sink) = SYSTEM_CANCELLER_DEVICES;
        let out = self
            .command("pactl")
            .args([
                "load-module",
                "module-echo-cancel",
                "aec_method=webrtc",
                "source_master=mic.monitor",
                "sink_master=spk",
            ])
            .arg(format!("source_name={source}"))
            .arg(format!("sink_name={sink}"))
            .output()
            .expect("pactl");
        let index = String::from_utf8_lossy(&out.stdout).trim().parse().ok();
        index.unwrap_or_else(|| {
            panic!(
                "module-echo-cancel did not load: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Unloads the system canceller `index`, and puts the mic's volume back: its gain control
    /// (on by default) turns the master source down while it runs and leaves it there, and
    /// every later run's room would be quieter (the next `off` heard the echo 9–28 dB lower).
    pub fn unload_system_canceller(&self, index: u32) {
        self.unload_module(index);
        let restored = self
            .command("pactl")
            .args(["set-source-volume", "mic.monitor", "100%"])
            .status()
            .expect("pactl");
        assert!(restored.success(), "the mic's volume was not restored");
    }

    /// Unloads the module `index` from the server.
    pub fn unload_module(&self, index: u32) {
        let unloaded = self
            .command("pactl")
            .args(["unload-module", &index.to_string()])
            .status()
            .expect("pactl");
        assert!(unloaded.success(), "module {index} did not unload");
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

/// A player started by [`PulseRig::loop_into_mic`]; dropping it stops the sound.
pub struct LoopedPlayer {
    child: Child,
    feeder: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LoopedPlayer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(feeder) = self.feeder.take() {
            let _ = feeder.join();
        }
    }
}

/// One thread of a process and the CPU time it has used so far.
#[derive(Debug, Clone)]
pub struct ThreadTime {
    pub tid: u32,
    /// The thread's name (`comm`, 15 bytes at most): what it was named, or else the name of
    /// the thread that started it, which a new thread inherits.
    pub name: String,
    /// User plus system time, in seconds.
    pub cpu: f64,
}

/// The CPU time of each of `pid`'s threads so far, from `/proc/PID/task/*/stat` (a thread that
/// ends while it is read is left out).
pub fn thread_times(pid: u32) -> Vec<ThreadTime> {
    let per_second = super::clock_ticks_per_second();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid: u32 = task.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // The name is in parentheses and may hold spaces and parentheses of its own.
            let name = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_owned();
            let fields: Vec<&str> = stat
                .get(stat.rfind(')')? + 2..)?
                .split_whitespace()
                .collect();
            // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
            let ticks: u64 =
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            Some(ThreadTime {
                tid,
                name,
                cpu: ticks as f64 / per_second,
            })
        })
        .collect()
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
        self.wait_for_len(self.len() + (seconds * f64::from(RECORD_RATE)) as usize);
    }

    /// Waits until `samples` have been recorded in all (real time passes).
    pub fn wait_for_len(&self, samples: usize) {
        let seconds = samples.saturating_sub(self.len()) as f64 / f64::from(RECORD_RATE);
        let timeout = Duration::from_secs_f64(seconds * 3.0 + 5.0);
        let recorded = super::poll(timeout, Duration::from_millis(20), || {
            (self.len() >= samples).then_some(())
        });
        assert!(recorded.is_some(), "the speaker recording stalled");
    }

    /// Waits (up to `timeout`) until a 10 ms window louder than `threshold` (RMS) has been
    /// recorded; returns the index of its first sample, `None` if none came.
    pub fn wait_for_sound(&self, threshold: f32, timeout: Duration) -> Option<usize> {
        let window = (RECORD_RATE / 100) as usize;
        let mut checked = 0;
        super::poll(timeout, Duration::from_millis(10), || {
            let samples = self.samples.lock().unwrap();
            let whole = samples.len() / window * window;
            let found = samples[checked..whole].chunks(window).position(|w| {
                let power = w
                    .iter()
                    .map(|&s| (f32::from(s) / 32_768.0).powi(2))
                    .sum::<f32>();
                (power / window as f32).sqrt() > threshold
            });
            let start = checked;
            checked = whole;
            found.map(|at| start + at * window)
        })
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

/// A scratch folder whose config turns audio on (the shared test config turns it off).
pub fn audio_scratch() -> tempfile::TempDir {
    let scratch = tempfile::tempdir().expect("scratch dir");
    std::fs::write(
        scratch.path().join("config.toml"),
        "[audio]\nenabled = true\n",
    )
    .expect("write the audio config");
    scratch
}

/// Speech synthesised by espeak-ng into a WAV file.
pub fn spoken_phrase(dir: &Path, text: &str) -> PathBuf {
    spoken_wav(dir, "phrase", None, text)
}

/// Speech synthesised by espeak-ng into `dir/<name>.wav`, in `voice` (e.g. `en-us+f3`) or
/// espeak-ng's default one.
pub fn spoken_wav(dir: &Path, name: &str, voice: Option<&str>, text: &str) -> PathBuf {
    let path = dir.join(format!("{name}.wav"));
    let mut command = Command::new("espeak-ng");
    if let Some(voice) = voice {
        command.args(["-v", voice]);
    }
    let status = command
        .arg("-w")
        .arg(&path)
        .arg("--")
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

/// Where a reference sound was found inside a longer signal.
#[derive(Debug, Clone, Copy)]
pub struct Found {
    /// Normalised cross-correlation there (1 = the same waveform, whatever its level).
    pub correlation: f64,
    /// Sample of `signal` where the reference starts.
    pub at: usize,
    /// Least-squares level of the reference in the signal there (1 = as loud as the reference;
    /// what else the signal holds, uncorrelated with it, does not count).
    pub gain: f64,
}

/// Finds `reference` in `signal` starting between samples `from` and `to`: the best
/// normalised cross-correlation. Searched at a quarter of the rate first (groups of four
/// averaged: low-pass enough for speech), then refined around the best lag at half and at the
/// full rate, so that an unoptimised test build scans a second of lags in a fraction of one.
pub fn find(signal: &[f32], reference: &[f32], from: usize, to: usize) -> Found {
    let shrink = |x: &[f32], by: usize| -> Vec<f32> {
        x.chunks_exact(by)
            .map(|g| g.iter().sum::<f32>() / by as f32)
            .collect()
    };
    let coarse = best_lag(&shrink(signal, 4), &shrink(reference, 4), from / 4, to / 4);
    let centre = coarse.map_or(from / 2, |(lag, _)| lag * 2);
    let half = best_lag(
        &shrink(signal, 2),
        &shrink(reference, 2),
        centre.saturating_sub(6),
        centre + 6,
    );
    let centre = half.map_or(from, |(lag, _)| lag * 2);
    match best_lag(signal, reference, centre.saturating_sub(4), centre + 4) {
        Some((at, correlation)) => {
            let window = &signal[at..at + reference.len()];
            let dot: f64 = window
                .iter()
                .zip(reference)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            let energy: f64 = reference.iter().map(|v| f64::from(*v).powi(2)).sum();
            Found {
                correlation,
                at,
                gain: if energy > 0.0 { dot / energy } else { 0.0 },
            }
        }
        None => Found {
            correlation: 0.0,
            at: from,
            gain: 0.0,
        },
    }
}

/// [`find`] for a reference the signal may hold in pieces that moved: found whole first, then
/// each `piece`-sample stretch of it on its own within `slack` samples of where the whole put
/// it. The correlation and the level are the pieces', weighted by their energy. A rig whose
/// loopback re-times itself mid-sound (PulseAudio's does, by some milliseconds, when a player
/// joins its sink) shifts the rest of the sound: correlated whole, the shift reads as damage
/// the client never did.
pub fn find_in_pieces(
    signal: &[f32],
    reference: &[f32],
    from: usize,
    to: usize,
    piece: usize,
    slack: usize,
) -> Found {
    let whole = find(signal, reference, from, to);
    let (mut correlation, mut dot, mut weight) = (0.0, 0.0, 0.0);
    for (n, stretch) in reference.chunks(piece).enumerate() {
        let energy: f64 = stretch.iter().map(|v| f64::from(*v).powi(2)).sum();
        let near = whole.at + n * piece;
        let Some((at, found)) = best_lag(signal, stretch, near.saturating_sub(slack), near + slack)
        else {
            continue;
        };
        correlation += found * energy;
        dot += signal[at..at + stretch.len()]
            .iter()
            .zip(stretch)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum::<f64>();
        weight += energy;
    }
    if weight == 0.0 {
        return whole;
    }
    Found {
        correlation: correlation / weight,
        at: whole.at,
        gain: dot / weight,
    }
}

/// The lag in `from..=to` with the best normalised cross-correlation, and that correlation;
/// `None` if no lag fits the reference inside the signal.
fn best_lag(signal: &[f32], reference: &[f32], from: usize, to: usize) -> Option<(usize, f64)> {
    let ref_energy: f64 = reference.iter().map(|v| f64::from(*v).powi(2)).sum();
    // Window energies from running sums: one pass instead of one per lag.
    let mut prefix = Vec::with_capacity(signal.len() + 1);
    prefix.push(0.0f64);
    for v in signal {
        prefix.push(prefix[prefix.len() - 1] + f64::from(*v).powi(2));
    }
    let mut best: Option<(usize, f64)> = None;
    for lag in from..=to {
        let end = lag + reference.len();
        if end > signal.len() {
            break;
        }
        let dot: f32 = signal[lag..end]
            .iter()
            .zip(reference)
            .map(|(a, b)| a * b)
            .sum();
        let norm = ((prefix[end] - prefix[lag]).max(0.0) * ref_energy).sqrt();
        let correlation = if norm > 0.0 {
            f64::from(dot) / norm
        } else {
            0.0
        };
        if best.is_none_or(|(_, c)| correlation > c) {
            best = Some((lag, correlation));
        }
    }
    best
}

/// Mean power of the 10 ms windows louder than -40 dBFS, in dBFS: the level of speech
/// while it sounds, not diluted by its pauses.
pub fn speech_level_dbfs(samples: &[f32], rate: u32) -> f64 {
    livetalk::audio::pcm::speech_level_dbfs(samples, rate).expect("no speech to measure")
}

/// Mean power in dBFS (-inf for digital silence).
pub fn power_dbfs(samples: &[f32]) -> f64 {
    let power =
        samples.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / samples.len().max(1) as f64;
    10.0 * power.log10()
}
