#!/usr/bin/env python3
"""Voice cost beside Google's official command-line example: CPU, the sound server's CPU,
memory and start-up, on a private PulseAudio rig, against one `livetalk mock` over wss.

Not part of the test command: it measures, it does not judge, and it takes minutes. How to run
it, what it needs and what each column means: docs/performance.md ("Beside the official
example"). Usage:

    scripts/bench_voice.py --example ~/src/gemini-live-api-examples --python ~/.venv/bin/python

Every run starts a fresh PulseAudio server (null sinks: `spk` is the speaker, `mic` is played
into and its monitor is the microphone, as tests/common/rig.rs does), starts one client, waits
for its setupComplete at the mock, measures a connected, silent window, plays a spoken phrase
into the virtual mic and measures until the mock's reply has been played, reads the client's
peak memory, then stops the client and the server. Clients take turns: A, B, C, D, A, B, ...
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# The example's own setup (command-line/python/main.py at 832bc0e), given to livetalk too, so
# that the mock answers both with the same reply: the same model, system instruction and
# transcription, and no tools (the demo model names a tool in its reply when there are some).
EXAMPLE_MODEL = "gemini-3.1-flash-live-preview"
EXAMPLE_INSTRUCTION = "You are a helpful and friendly AI assistant."
LIVETALK_CONFIG = f"""# Written by scripts/bench_voice.py: the official example's setup.
model = "models/{EXAMPLE_MODEL}"
system_instruction = "{EXAMPLE_INSTRUCTION}"

[transcription]
input = true
output = true

[tools]
enabled = []

[audio]
enabled = true
"""

# No-op faults, used as probes: the mock logs every fault it applies ("mock fault", at debug,
# with the time), so each of these marks a moment of the conversation in the mock's log
# without changing what it sends. `slow` by a factor of 1 changes no speed; forgetting the
# resumption handles changes nothing for a client that never reconnects. The setup moment
# runs just before setupComplete goes out, in the same step; the user turn's when the mock's
# voice detection has heard the phrase end; turn_complete's just after turnComplete is queued.
PROBES = """
[[fault]]
at = "setup"
every = 1
action = "slow"
factor = 1.0

[[fault]]
at = "user_turn"
every = 1
action = "slow"
factor = 1.0

[[fault]]
at = "turn_complete"
every = 1
action = "fail_resumption"
"""

PHRASE = "Is the living room lamp on?"
SAMPLE_FIELDS = ("idle", "turn", "server_idle", "server_turn", "both_idle", "both_turn",
                 "wakes_idle", "wakes_turn")


def fail(message: str, code: int = 1) -> None:
    print(f"bench_voice: {message}", file=sys.stderr)
    sys.exit(code)


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- /proc ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (its exited threads included), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_memory_mib(pid: int) -> float:
    """VmHWM, the peak resident memory, in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def thread_seconds(pid: int) -> dict[str, float]:
    """utime + stime of each live thread of a process, summed by thread name, in seconds."""
    used: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            with open(task / "stat") as stat:
                head, tail = stat.read().rsplit(")", 1)
        except OSError:
            continue  # the thread ended between the listing and the reading
        name = head.split("(", 1)[1]
        fields = tail.split()
        used[name] = used.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return used


def switches(pid: int) -> int:
    """Context switches of every live thread of a process, voluntary and not: how often its
    threads were woken (or put off the core) so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            with open(task / "status") as status:
                for line in status:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        total += int(line.split()[1])
        except OSError:
            continue  # the thread ended between the listing and the reading
    return total


class Window:
    """CPU of a few processes between two moments, as % of one core, and the client's
    wake-ups a second; with `threads`, the client's CPU by thread name too."""

    def __init__(self, pids: dict[str, int], threads: bool = False):
        self.pids = pids
        self.start = time.time()
        self.used = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.switches = switches(pids["client"])
        self.threads = thread_seconds(pids["client"]) if threads else None

    def close(self) -> tuple[float, dict[str, float]]:
        end = time.time()
        used = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        woken = switches(self.pids["client"]) - self.switches
        span = end - self.start
        if self.threads is not None:
            now = thread_seconds(self.pids["client"])
            shares = sorted(((100 * (now[n] - self.threads.get(n, 0.0)) / span, n)
                             for n in now), reverse=True)
            note("  client threads: " + ", ".join(f"{n} {share:.1f} %"
                                                  for share, n in shares if share >= 0.05))
        shares = {name: 100 * (used[name] - self.used[name]) / span for name in used}
        shares["wakes"] = woken / span
        return span, shares


# --- the mock -------------------------------------------------------------------------------


@dataclass
class Probe:
    at: float  # Unix time, from the mock's log line
    what: str  # "setup", "user_turn" or "turn_complete"


class Mock:
    """`livetalk mock` over wss, its debug log read as probes arrive."""

    def __init__(self, livetalk: Path, work: Path, cert: Path, key: Path, speed: float):
        scenario = work / "probes.toml"
        scenario.write_text(PROBES)
        self.log = open(work / "mock.log", "w")
        env = dict(os.environ, LIVETALK_LOG="debug")
        self.process = subprocess.Popen(
            [str(livetalk), "mock", "--listen", "127.0.0.1:0", "--tls-cert", str(cert),
             "--tls-key", str(key), "--speed", str(speed), "--scenario", str(scenario)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, env=env,
        )
        line = self.process.stdout.readline()
        match = re.search(r"wss://127\.0\.0\.1:(\d+)", line)
        if not match:
            self.process.kill()
            said = (line.strip() or self.process.stderr.read()[-2000:].strip())
            fail(f"`{livetalk} mock` did not start" + (f": {said}" if said else ""))
        self.port = int(match.group(1))
        self.probes: list[Probe] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        # One connection at a time: the first `slow` after a connection's upgrade is its
        # setup, the later ones its user turns.
        set_up = False
        for line in self.process.stderr:
            self.log.write(line)
            stamp, _, rest = line.partition(" ")
            what = None
            if "livetalk_mock::server: upgrade" in rest:
                set_up = False
            elif "mock fault" in rest and "Slow" in rest:
                what = "user_turn" if set_up else "setup"
                set_up = True
            elif "mock fault" in rest and "FailResumption" in rest:
                what = "turn_complete"
            if what is None:
                continue
            try:
                at = datetime.datetime.fromisoformat(stamp).timestamp()
            except ValueError:
                continue
            with self.changed:
                self.probes.append(Probe(at, what))
                self.changed.notify_all()

    def wait_for(self, what: str, after: float, timeout: float,
                 client: subprocess.Popen | None = None) -> Probe | None:
        """The first probe `what` stamped after `after`, waiting up to `timeout` seconds, or
        until `client` has exited."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for probe in self.probes:
                    if probe.what == what and probe.at >= after:
                        return probe
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    return None
                if client is not None and client.poll() is not None:
                    return None
                # Woken by each probe; a client's exit is seen within a quarter second.
                self.changed.wait(min(left, 0.25))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=5)
        self.log.close()


# --- the rig --------------------------------------------------------------------------------


class Rig:
    """A private PulseAudio server with null sinks `spk` (the speaker) and `mic` (played into;
    its monitor is the microphone), both 48 kHz, as tests/common/rig.rs starts it."""

    def __init__(self, folder: Path):
        self.folder = folder
        runtime = folder / "rt"
        runtime.mkdir(parents=True)
        (folder / "home").mkdir()
        self.cookie = folder / "cookie"
        self.cookie.write_bytes(bytes([7]) * 256)
        socket = runtime / "native"
        self.env = {
            "PULSE_SERVER": f"unix:{socket}",
            "PULSE_RUNTIME_PATH": str(runtime),
            "PULSE_COOKIE": str(self.cookie),
            # Where a client asks for the default device: the ALSA `default` device through
            # ALSA's PulseAudio plugin (the example, livetalk on ALSA) follows these.
            "PULSE_SINK": "spk",
            "PULSE_SOURCE": "mic.monitor",
        }
        modules = [
            f"module-native-protocol-unix socket={socket} auth-anonymous=1",
            "module-null-sink sink_name=spk rate=48000 channels=2",
            "module-null-sink sink_name=mic rate=48000 channels=1",
        ]
        args = ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1",
                "--use-pid-file=no", "--system=false", "--log-target=stderr"]
        for module in modules:
            args += ["-L", module]
        self.log = open(folder / "pulseaudio.log", "w")
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=self.log, stdin=subprocess.DEVNULL,
            env=dict(os.environ, HOME=str(folder / "home"), PULSE_RUNTIME_PATH=str(runtime),
                     PULSE_STATE_PATH=str(folder / "state")),
        )
        deadline = time.monotonic() + 20
        while not self.pactl("info"):
            if self.process.poll() is not None:
                fail(f"PulseAudio exited at start; its log: {folder / 'pulseaudio.log'}")
            if time.monotonic() > deadline:
                fail("PulseAudio did not answer in 20 s")
            time.sleep(0.05)  # polling the server's readiness (pactl waits on the socket)
        self.pactl("set-default-sink", "spk")
        self.pactl("set-default-source", "mic.monitor")

    def pactl(self, *args: str) -> bool:
        return subprocess.run(["pactl", *args], env=self.client_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0

    def client_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        return dict(base if base is not None else os.environ, **self.env)

    def play_into_mic(self, wav: Path, latency_ms: int) -> subprocess.Popen:
        return subprocess.Popen(
            ["paplay", "--device=mic", f"--latency-msec={latency_ms}", str(wav)],
            env=self.client_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        self.log.close()


# --- the clients ----------------------------------------------------------------------------


@dataclass
class Client:
    name: str
    label: str
    # The kind of client this is (one of CLIENTS' names) and, for another build of livetalk
    # measured beside this one (`--against`), its binary.
    kind: str = ""
    binary: Path | None = None

    def __post_init__(self):
        self.kind = self.kind or self.name


CLIENTS = [
    Client("example", "official example (PyAudio, no aec)"),
    Client("alsa-aec", "livetalk, ALSA, `--echo aec`"),
    Client("alsa-off", "livetalk, ALSA, `--echo off`"),
    Client("pulse-aec", "livetalk, `--audio-host pulseaudio`, `--echo aec`"),
]


def start_client(client: Client, options, rig: Rig, mock: Mock, folder: Path) -> subprocess.Popen:
    url = f"127.0.0.1:{mock.port}"
    home = folder / "home"
    home.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items()
            if not k.upper().endswith("_PROXY") and k not in ("SSL_CERT_DIR", "GOOGLE_API_KEY")}
    base.update(HOME=str(home), GEMINI_API_KEY="bench-key-not-real",
                SSL_CERT_FILE=str(options.ca))
    env = rig.client_env(base)
    if client.kind == "example":
        # The example as it is: the SDK reads its server, key and trust from the environment.
        env.update(GOOGLE_GEMINI_BASE_URL=f"https://{url}", PYTHONUNBUFFERED="1")
        args = [options.python, str(options.example_main)]
        cwd = options.example_main.parent
    else:
        config = folder / "config.toml"
        config.write_text(LIVETALK_CONFIG)
        env.update(LIVETALK_CONFIG=str(config), XDG_DATA_HOME=str(folder / "data"),
                   XDG_CONFIG_HOME=str(folder / "config"))
        for var in ("LIVETALK_ENDPOINT", "LIVETALK_MODEL", "LIVETALK_AUDIO_HOST",
                    "LIVETALK_API_VERSION", "LIVETALK_VOICE"):
            env.pop(var, None)
        args = [str(client.binary or options.livetalk), "--headless", "--endpoint",
                f"wss://{url}"]
        if client.kind == "pulse-aec":
            args += ["--audio-host", "pulseaudio", "--input-device", "mic.monitor",
                     "--output-device", "spk", "--echo", "aec"]
        else:
            args += ["--audio-host", "alsa", "--echo", client.kind.removeprefix("alsa-")]
        cwd = folder
    # stdin stays open and silent: livetalk --headless would end at its end.
    with open(folder / "client.out", "w") as out, open(folder / "client.err", "w") as err:
        return subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=out,
                                stderr=err, start_new_session=True)


def stop_client(process: subprocess.Popen, client: Client) -> None:
    if process.poll() is None:
        # Ctrl-C is how the example is stopped; livetalk ends cleanly on SIGTERM.
        process.send_signal(signal.SIGINT if client.kind == "example" else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdin:
        process.stdin.close()


@dataclass
class Run:
    client: str
    round: int
    ok: bool = False
    why: str = ""
    startup_ms: float | None = None
    samples: dict[str, float] = field(default_factory=dict)
    memory_mib: float | None = None
    turn_secs: float | None = None
    folder: str = ""


def run_once(client: Client, round_no: int, options, mock: Mock, work: Path) -> Run:
    folder = work / f"round{round_no}-{client.name}"
    folder.mkdir()
    run = Run(client.name, round_no, folder=str(folder))
    rig = Rig(folder / "rig")
    process = None
    try:
        started = time.time()
        process = start_client(client, options, rig, mock, folder)
        setup = mock.wait_for("setup", started, options.connect_timeout, process)
        if setup is None:
            ended = process.poll()
            run.why = (f"the client exited ({ended}) before its setup reached the mock"
                       if ended is not None else
                       f"no setup reached the mock in {options.connect_timeout:.0f} s")
            return run
        run.startup_ms = (setup.at - started) * 1000
        pids = {"client": process.pid, "server": rig.process.pid}

        # Both clients open their streams around the connection: let that settle first.
        time.sleep(options.settle)
        if process.poll() is not None:
            run.why = f"the client exited ({process.returncode}) after connecting"
            return run
        window = Window(pids, options.threads)
        time.sleep(options.idle)
        _, idle = window.close()

        window = Window(pids, options.threads)
        player = rig.play_into_mic(options.phrase_wav, options.phrase_latency)
        done = mock.wait_for("turn_complete", window.start, options.turn_timeout, process)
        player.wait()
        if done is None:
            heard = mock.wait_for("user_turn", window.start, 0)
            run.why = ("the mock heard the phrase but its reply did not end" if heard
                       else "the mock never heard the phrase")
            if process.poll() is not None:
                run.why = f"the client exited ({process.returncode}) during the turn"
            return run
        # The mock streams in real time; what the client still holds then plays out.
        time.sleep(max(0.0, done.at + options.tail - time.time()))
        if process.poll() is not None:
            run.why = f"the client exited ({process.returncode}) during the turn"
            return run
        span, turn = window.close()
        run.turn_secs = span
        run.memory_mib = peak_memory_mib(process.pid)
        run.samples = {
            "idle": idle["client"], "server_idle": idle["server"],
            "both_idle": idle["client"] + idle["server"],
            "turn": turn["client"], "server_turn": turn["server"],
            "both_turn": turn["client"] + turn["server"],
            "wakes_idle": idle["wakes"], "wakes_turn": turn["wakes"],
        }
        run.ok = True
        return run
    except OSError as error:
        # /proc/<pid> is gone: the client ended between the check and the reading.
        run.why = f"the client could not be measured: {error}"
        return run
    finally:
        if process is not None:
            stop_client(process, client)
        rig.stop()


# --- the report -----------------------------------------------------------------------------


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def report(runs: list[Run], clients: list[Client], rounds: int) -> str:
    """Two tables: the medians with their ratios to the example's, then each column's range."""
    columns = [
        ("idle, connected", "idle", "%"),
        ("spoken turn", "turn", "%"),
        ("server, idle", "server_idle", "%"),
        ("server, turn", "server_turn", "%"),
        ("client + server, idle", "both_idle", "%"),
        ("client + server, turn", "both_turn", "%"),
        ("memory", "memory", "MiB"),
        ("start-up", "startup", "ms"),
        ("client wake-ups, idle", "wakes_idle", "/s"),
        ("client wake-ups, turn", "wakes_turn", "/s"),
    ]

    def values(name: str, key: str) -> list[float]:
        out = []
        for run in runs:
            if run.client != name or not run.ok:
                continue
            if key in SAMPLE_FIELDS:
                out.append(run.samples[key])
            else:
                out.append(run.memory_mib if key == "memory" else run.startup_ms)
        return out

    def shown(value: float, unit: str) -> str:
        if unit in ("ms", "/s"):
            return f"{value:.0f} {unit}"
        return f"{value:.1f} {unit}"

    header = ["| client | runs | " + " | ".join(title for title, _, _ in columns) + " |",
              "|---" * (len(columns) + 2) + "|"]
    medians = {c.name: {key: median(values(c.name, key)) for _, key, _ in columns}
               for c in clients}
    base = medians.get("example")
    table = list(header)
    ranges = list(header)
    for client in clients:
        ok = sum(1 for r in runs if r.client == client.name and r.ok)
        cells, spans = [], []
        for _, key, unit in columns:
            value = medians[client.name][key]
            if value is None:
                cells.append("–")
                spans.append("–")
                continue
            text = shown(value, unit)
            reference = base.get(key) if base and client.name != "example" else None
            if reference:
                text += f" ({value / reference:.2f}×)"
            cells.append(text)
            seen = values(client.name, key)
            low, high = shown(min(seen), unit), shown(max(seen), unit)
            spans.append(low if low == high else f"{low.split()[0]}–{high}")
        table.append(f"| {client.label} | {ok}/{rounds} | " + " | ".join(cells) + " |")
        ranges.append(f"| {client.label} | {ok}/{rounds} | " + " | ".join(spans) + " |")
    return ("Medians (ratio to the official example's):\n\n" + "\n".join(table)
            + "\n\nLowest–highest:\n\n" + "\n".join(ranges))


# --- set-up ---------------------------------------------------------------------------------


def make_ca(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a certificate it signed for 127.0.0.1: the SDK dials wss only."""
    ca_key, ca, key, csr, cert = (folder / n for n in
                                  ("ca-key.pem", "ca.pem", "key.pem", "cert.csr", "cert.pem"))
    extensions = folder / "cert.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                          "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    steps = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
         "-out", ca, "-days", "2", "-subj", "/CN=livetalk bench CA"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
         "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", extensions],
    ]
    for step in steps:
        done = subprocess.run([str(s) for s in step], capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"openssl could not make the test CA: {done.stderr.strip()[-500:]}")
    return ca, cert, key


def parse_args():
    parser = argparse.ArgumentParser(
        description="Measure livetalk's voice cost beside the official command-line example "
                    "(see docs/performance.md).")
    parser.add_argument("--example", type=Path, required=True,
                        help="a checkout of google-gemini/gemini-live-api-examples "
                             "(its command-line/python/main.py is run as it is)")
    parser.add_argument("--livetalk", type=Path, default=REPO / "target/release/livetalk",
                        help="the livetalk binary (default: target/release/livetalk)")
    parser.add_argument("--python", default="python3",
                        help="the Python that runs the example, with google-genai and PyAudio "
                             "installed (default: python3)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="runs of each client, interleaved (default: 5)")
    parser.add_argument("--clients", default=",".join(c.name for c in CLIENTS),
                        help="which clients, in order (default: all: "
                             + ", ".join(c.name for c in CLIENTS) + ")")
    parser.add_argument("--against", type=Path,
                        help="another livetalk binary (an older build): each livetalk client "
                             "also runs with it, right after the same client with --livetalk")
    parser.add_argument("--idle", type=float, default=5.0,
                        help="seconds of the connected, silent window (default: 5)")
    parser.add_argument("--threads", action="store_true",
                        help="also print each window's client CPU by thread name")
    parser.add_argument("--json", type=Path, help="also write every run to this file")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (logs of every client, server and the mock)")
    options = parser.parse_args()

    def bad(flag: str, why: str) -> None:
        parser.error(f"{flag}: {why}")  # exits 2

    if options.rounds < 1 or options.rounds > 100:
        bad("--rounds", "must be between 1 and 100")
    if not 1 <= options.idle <= 120:
        bad("--idle", "must be between 1 and 120 seconds")
    names = [n.strip() for n in options.clients.split(",") if n.strip()]
    known = {c.name: c for c in CLIENTS}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        bad("--clients", f"unknown {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(known)}")
    options.clients = [known[n] for n in names]
    if options.against:
        if not os.access(options.against, os.X_OK):
            bad("--against", f"{options.against} is not an executable")
        against = options.against.resolve()
        options.clients = [c for client in options.clients for c in (
            [client] if client.kind == "example" else
            [client, Client(f"{client.name}@against", f"{client.label}, {against.name}",
                            client.kind, against)])]
    main = options.example / "command-line/python/main.py"
    if not main.is_file():
        bad("--example", f"{main} is not there: give the root of a checkout of "
                         "google-gemini/gemini-live-api-examples")
    options.example_main = main.resolve()
    if not os.access(options.livetalk, os.X_OK):
        bad("--livetalk", f"{options.livetalk} is not an executable "
                          "(cargo build --release --bin livetalk)")
    options.livetalk = options.livetalk.resolve()
    # Fixed for now: the rig's player, the mock's pace and the waits.
    options.phrase_latency = 20  # ms, as the rig tests play into the mic
    options.settle = 2.0
    options.tail = 0.5
    options.connect_timeout = 30.0
    options.turn_timeout = 60.0
    options.speed = 1.0
    return options


def check_tools(options) -> None:
    missing = [t for t in ("pulseaudio", "pactl", "paplay", "espeak-ng", "openssl")
               if shutil.which(t) is None]
    if missing:
        fail(f"missing {', '.join(missing)}: apt-get install pulseaudio pulseaudio-utils "
             "espeak-ng openssl libasound2-plugins")
    try:
        probe = subprocess.run([options.python, "-c", "import google.genai, pyaudio"],
                               capture_output=True, text=True)
    except OSError as error:
        fail(f"--python: cannot run {options.python}: {error.strerror}", 2)
    if probe.returncode != 0:
        fail(f"{options.python} cannot import google-genai and PyAudio (pip install "
             "google-genai pyaudio, with Debian's portaudio19-dev; or give --python)", 2)


def main() -> None:
    options = parse_args()
    check_tools(options)
    work = Path(tempfile.mkdtemp(prefix="livetalk-bench-"))
    options.ca, cert, key = make_ca(work)
    options.phrase_wav = work / "phrase.wav"
    subprocess.run(["espeak-ng", "-w", str(options.phrase_wav), "--", PHRASE], check=True)
    mock = Mock(options.livetalk, work, cert, key, options.speed)
    runs: list[Run] = []
    try:
        for round_no in range(1, options.rounds + 1):
            for client in options.clients:
                run = run_once(client, round_no, options, mock, work)
                runs.append(run)
                if run.ok:
                    s = run.samples
                    note(f"round {round_no} {client.name}: idle {s['idle']:.1f} % "
                         f"(+server {s['server_idle']:.1f} %), turn {s['turn']:.1f} % "
                         f"(+server {s['server_turn']:.1f} %) over {run.turn_secs:.1f} s, "
                         f"{run.memory_mib:.1f} MiB, start-up {run.startup_ms:.0f} ms")
                else:
                    note(f"round {round_no} {client.name}: failed: {run.why} "
                         f"(logs in {run.folder})")
                    options.keep = True
    finally:
        mock.stop()
    if options.json:
        options.json.write_text(json.dumps([run.__dict__ for run in runs], indent=2) + "\n")
    print(f"{options.rounds} interleaved round(s); CPU in % of one core (client: the process, "
          "server: the PulseAudio daemon), memory: peak resident (VmHWM), start-up: process "
          "start to setupComplete at the mock.\n")
    print(report(runs, options.clients, options.rounds))
    if options.keep:
        note(f"\nlogs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if not any(run.ok for run in runs):
        sys.exit(1)


if __name__ == "__main__":
    main()
