#!/usr/bin/env python3
"""The inputs of tests/input_budget.rs, tests/terminal_safety.rs and the paste and WebRTC
tests, at the full size hostile peers and files sent (issue 54): each command's peak resident
memory beside the same command with a tiny input, the servers' memory 10 s after ten clients
left, the pastes and the WebRTC session's exit timed. Not part of scripts/test.sh: it takes a
few minutes and a few GB of disk. docs/testing.md has its last figures.

Usage: .venv/bin/python scripts/input_costs.py [--bin target/debug/livetalk] [--only NAME]
(`cargo build` first; `--bin target/release/livetalk` for release figures).
"""

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time

import websockets

MIB = 1024 * 1024
LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


def status_mib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


class Env:
    """An isolated config and data folder, as the tests give livetalk."""

    def __init__(self, binary):
        self.binary = os.path.abspath(binary)
        self.dir = tempfile.mkdtemp(prefix="input-costs-")
        self.config = os.path.join(self.dir, "config.toml")
        with open(self.config, "w") as config:
            config.write("[audio]\nenabled = false\n")
        self.data = os.path.join(self.dir, "data")
        self.sessions = os.path.join(self.data, "livetalk", "sessions")

    def environ(self, **extra):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "HTTPS_PROXY", "ALL_PROXY")
        }
        env.update(
            LIVETALK_CONFIG=self.config,
            XDG_DATA_HOME=self.data,
            XDG_CONFIG_HOME=os.path.join(self.dir, "config"),
            HOME=self.dir,
        )
        env.update(extra)
        return env

    def measured(self, args, stdin=b"", timeout=1200, **extra):
        """Runs livetalk ARGS under /usr/bin/time: (peak MiB, exit code, seconds, stdout)."""
        started = time.monotonic()
        report = os.path.join(self.dir, "time.txt")
        run = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", report, self.binary, *args],
            input=stdin,
            capture_output=True,
            env=self.environ(**extra),
            timeout=timeout,
        )
        took = time.monotonic() - started
        with open(report) as peak:
            kib = int(peak.read().strip().splitlines()[-1])
        return kib / 1024, run.returncode, took, run.stdout

    def spawn(self, args):
        process = subprocess.Popen(
            [self.binary, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.environ(),
        )
        for line in process.stdout:
            for word in line.decode().split():
                if word.startswith("ws://"):
                    return process, word.rstrip(".,")
        raise RuntimeError("no URL printed")


def row(name, peak, tiny, extra=""):
    print(f"{name:58} peak {peak:8.1f} MiB  (tiny input {tiny:6.1f} MiB, +{peak - tiny:6.1f}){extra}", flush=True)


# ---- livetalk against a server streaming megabyte text parts ----


async def streaming_server(parts, part_bytes, ready):
    async def handler(ws):
        await ws.recv()
        await ws.send(json.dumps({"setupComplete": {}}))
        async for message in ws:
            if "clientContent" in message:
                break
        frame = json.dumps({"serverContent": {"modelTurn": {"parts": [{"text": "word " * (part_bytes // 5)}]}}})
        for _ in range(parts):
            await ws.send(frame)
        await ws.send(json.dumps({"serverContent": {"turnComplete": True}}))
        async for _ in ws:
            pass

    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        ready.set_result(f"ws://127.0.0.1:{port}")
        await asyncio.Future()


def headless_streaming(env, parts, part_bytes):
    loop = asyncio.new_event_loop()
    ready = loop.create_future()
    import threading

    thread = threading.Thread(target=lambda: loop.run_until_complete(streaming_server(parts, part_bytes, ready)), daemon=True)
    thread.start()
    while not ready.done():
        time.sleep(0.01)
    url = ready.result()
    return env.measured(["--headless", "--endpoint", url], stdin=b"Tell me everything.\n", GEMINI_API_KEY="fake-key-for-a-local-server")


def text_parts(env):
    tiny, code, _, _ = headless_streaming(env, 4000, 5)
    peak, code2, took, _ = headless_streaming(env, 4000, MIB)
    row("livetalk --headless, 4,000 text parts of 1 MiB", peak, tiny, f"  exit {code2} in {took:.1f} s")


# ---- recordings of millions of short lines ----


def many_line_recording(folder, lines):
    """Short lines, as the hostile file had them (6.2 M in 250 MiB, under the 256 MiB a
    recording may be): frames, the model's text applied, and damaged lines."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "session.jsonl"), "w") as out:
        out.write('{"t":0.0,"type":"meta","format":3,"livetalk_version":"0.1.0","started_at":"2026-01-02T03:04:05+00:00[UTC]","model":"models/gemini-live-test","voice":"Puck","endpoint_host":"127.0.0.1","offline":true,"devices":[],"config":{}}\n')
        out.write('{"t":0.1,"type":"applied","msg":{"user_text":"Tell me everything."}}\n')
        kinds = [
            '{"t":%.3f,"type":"recv","message":{"serverContent":{"modelTurn":{"parts":[{"text":"hi "}]}}}}\n',
            '{"t":%.3f,"type":"applied","msg":{"session":{"model_text":"hi "}}}\n',
            '{"t":%.3f,"type":"send","message":{"realtimeInput":{"activityStart":{}}}}\n',
        ] + ['{"t":%.3f,"damaged\n'] * 6
        for i in range(lines):
            out.write(kinds[i % len(kinds)] % (0.2 + i * 1e-5))


def recordings(env):
    tiny = os.path.join(env.sessions, "tiny")
    big = os.path.join(env.sessions, "big")
    many_line_recording(tiny, 40)
    many_line_recording(big, 6_200_000)
    size = os.path.getsize(os.path.join(big, "session.jsonl")) / MIB
    assert size < 256, f"the recording is {size:.0f} MiB, over the 256 MiB livetalk reads"
    for name, args in [
        ("inspect", ["inspect"]),
        ("inspect --markdown", ["inspect", "--markdown"]),
        ("replay --headless --instant", ["replay", "--headless", "--instant"]),
        ("check --write-scenario", ["check", "--write-scenario"]),
    ]:
        small, _, _, _ = env.measured(args + [tiny])
        peak, code, took, _ = env.measured(args + [big])
        row(f"livetalk {name}, 6.2 M lines ({size:.0f} MiB)", peak, small, f"  exit {code} in {took:.1f} s")
    peak, code, took, _ = env.measured(["sessions"])
    row("livetalk sessions (the same two)", peak, small, f"  exit {code} in {took:.1f} s")


# ---- the servers: ten clients at once ----


async def costly_client(kind, base, items):
    """One client's costly message; returns what the server answered it with."""
    if kind == "mock":
        async with websockets.connect(base + LIVE_PATH, max_size=None) as ws:
            await ws.send(json.dumps({"setup": {"model": "models/m", "generationConfig": {"responseModalities": ["TEXT"]}}}))
            await ws.recv()
            turns = ",".join(['{"role":"user","parts":[{"text":"a"}]}'] * items)
            try:
                await ws.send('{"clientContent":{"turns":[' + turns + '],"turnComplete":true}}')
                async for message in ws:
                    if '"turnComplete"' in str(message):
                        return "answered"
            except websockets.ConnectionClosed:
                pass
            await ws.wait_closed()
            return f"closed {ws.close_code}: {ws.close_reason}"
    else:
        async with websockets.connect(base, max_size=None) as ws:
            await ws.send(json.dumps({"type": "CONNECT_GEMINI", "payload": {"initialConfig": {"model": "models/m", "generationConfig": {"responseModalities": ["TEXT"]}}}}))
            while "SETUP_COMPLETE" not in await ws.recv():
                pass
            # Empty text parts, as the hostile app sent them (13.4 MiB for a million).
            parts = ", ".join(['{"text": "Is the lamp on?"}'] + ['{"text": ""}'] * (items - 1))
            try:
                await ws.send('{"type":"SEND_MESSAGE","payload":{"parts":[' + parts + '],"turnComplete":true}}')
                async for message in ws:
                    if "GEMINI_ERROR" in message:
                        return "GEMINI_ERROR: " + json.loads(message)["payload"]["message"]
                    if "TURN_COMPLETE" in message:
                        return "answered"
            except websockets.ConnectionClosed:
                pass
            await ws.wait_closed()
            return f"closed {ws.close_code}: {ws.close_reason}"


def server_round(env, kind, items, clients):
    args = ["mock", "--listen", "127.0.0.1:0"] if kind == "mock" else ["serve", "--listen", "127.0.0.1:0", "--offline"]
    process, url = env.spawn(args)
    try:
        before = status_mib(process.pid, "VmRSS")

        async def all_clients():
            return await asyncio.gather(*(costly_client(kind, url, items) for _ in range(clients)))

        answers = asyncio.run(all_clients())
        peak = status_mib(process.pid, "VmHWM")
        time.sleep(10)
        after = status_mib(process.pid, "VmRSS")
        return peak, before, after, answers
    finally:
        process.kill()
        process.wait()


def servers(env):
    kinds = [
        ("serve", 1_000_000, "a 13.4 MiB SEND_MESSAGE of a million empty text parts"),
        ("mock", 700_000, "a 27 MB frame of 700,000 tiny turns"),
        # Under the largest message the mock reads (10.7 MiB), so it is read and counted.
        ("mock", 250_000, "a 9.3 MiB frame of 250,000 tiny turns"),
    ]
    for kind, items, what in [k for k in kinds if os.environ.get("ONLY_KIND") in (None, k[0])]:
        for clients in (1, 10):
            tiny, _, _, _ = server_round(env, kind, 1, clients)
            peak, before, after, answers = server_round(env, kind, items, clients)
            row(f"livetalk {kind}, {clients} client(s), {what}", peak, tiny, f"  RSS {before:.1f} MiB before, {after:.1f} MiB 10 s after")
            for answer in sorted(set(answers)):
                print(f"    {answers.count(answer)} answered: {answer}", flush=True)


# ---- the WebRTC client against a bridge that answers with garbage ----


async def bad_bridge(answer, ready):
    async def handler(ws):
        try:
            async for message in ws:
                kind = json.loads(message).get("type")
                if kind == "CONNECT_GEMINI":
                    await ws.send(json.dumps({"type": "SETUP_COMPLETE", "payload": {"success": True}}))
                elif kind == "WEBRTC_OFFER":
                    await ws.send(json.dumps({"type": "WEBRTC_ANSWER", "payload": {"sdp": answer}}))
        except websockets.ConnectionClosed:
            # livetalk gave up waiting for this bridge to close and left: what is measured.
            pass
        await asyncio.Future()

    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None) as server:
        ready.set_result(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await asyncio.Future()


def webrtc(env):
    import threading

    for name, answer in [("garbage", "v=0\r\ngarbage"), ("a 30 MB answer", "v" * 30_000_000)]:
        loop = asyncio.new_event_loop()
        ready = loop.create_future()
        threading.Thread(target=lambda: loop.run_until_complete(bad_bridge(answer, ready)), daemon=True).start()
        while not ready.done():
            time.sleep(0.01)
        peak, code, took, _ = env.measured(["--headless", "--bridge", ready.result(), "--bridge-transport", "webrtc"], timeout=120)
        print(f"livetalk --bridge-transport webrtc, a bridge answering with {name:15} exit {code} in {took:.1f} s, peak {peak:.1f} MiB", flush=True)


# ---- pastes in the TUI ----


def pastes(env):
    if not shutil.which("tmux"):
        print("pastes: tmux is not installed; skipped")
        return
    socket = os.path.join(env.dir, "tmux.sock")
    tmux = ["tmux", "-S", socket]
    subprocess.run(tmux + ["-f", "/dev/null", "new-session", "-d", "-s", "lt", "-x", "120", "-y", "40", env.binary], env=env.environ(TERM="xterm-256color"), check=True)

    def screen():
        return subprocess.run(tmux + ["capture-pane", "-p", "-t", "lt"], capture_output=True, text=True).stdout

    def wait(pred, limit=600):
        start = time.monotonic()
        while time.monotonic() - start < limit:
            text = screen()
            if pred(text):
                return time.monotonic() - start
            time.sleep(0.02)
        raise TimeoutError(screen())

    try:
        wait(lambda s: "Gemini is listening" in s, 60)
        for size, ok in [(50_000, True), (500_000, True), (1_000_000, True), (5_000_000, False)]:
            subprocess.run(tmux + ["send-keys", "-t", "lt", "C-u"])
            wait(lambda s: "END-OF-PASTE" not in s and "was not taken" not in s or not ok, 10)
            text = "word " * (size // 5 - 3) + "END-OF-PASTE"
            path = os.path.join(env.dir, "paste.txt")
            with open(path, "w") as f:
                f.write(text)
            subprocess.run(tmux + ["load-buffer", "-b", "p", path], check=True)
            start = time.monotonic()
            subprocess.run(tmux + ["paste-buffer", "-p", "-b", "p", "-t", "lt"], check=True)
            wait((lambda s: "word END-OF-PASTE" in s) if ok else (lambda s: "was not taken" in s))
            took = time.monotonic() - start
            what = "taken" if ok else "refused with a notice"
            print(f"a paste of {len(text) / 1e6:.2f} MB {what} in {took:.2f} s", flush=True)
    finally:
        subprocess.run(tmux + ["kill-server"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="target/debug/livetalk")
    parser.add_argument("--only", choices=["text", "recordings", "servers", "webrtc", "pastes"])
    args = parser.parse_args()
    env = Env(args.bin)
    print(f"uptime: {open('/proc/loadavg').read().strip()}", flush=True)
    try:
        for name, step in [("text", text_parts), ("recordings", recordings), ("servers", servers), ("webrtc", webrtc), ("pastes", pastes)]:
            if args.only in (None, name):
                step(env)
    finally:
        shutil.rmtree(env.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
