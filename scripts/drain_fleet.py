#!/usr/bin/env python3
"""A fleet of `livetalk serve` instances behind HAProxy, each drained in turn while apps talk.

Three instances share one upstream `livetalk mock`; HAProxy runs the configuration
docs/bridge.md gives. Thirty apps hold conversations through it: 29 over the WebSocket, one
with its voice on WebRTC (aiortc, the independent peer the WebRTC tests use). Each app
alternates spoken turns (an espeak-ng phrase as its microphone) and tool-call turns whose
words only make sense to a model that remembers the conversation ("Turn it on." after asking
about the lamp). Every few seconds an instance is sent SIGTERM: it drains (each app's turn
ends, the app gets its handle and a 1012 close), exits, and is started again, as a deploy
does, before the next is drained.

An app follows the protocol and nothing more: on a 1012 close it connects again through
HAProxy with its newest SESSION_HANDLE, and a turn the draining instance did not take (a
SEND_MESSAGE refused "was not sent", a spoken turn no reply came for) it sends again. A turn
is lost if its answer never comes, or comes without the conversation (a tool call about
another device, or none). Reported per drain: apps moved, the drain's length (SIGTERM to
exit), and for each moved app the time from SIGTERM to its session set up again elsewhere.

Not part of scripts/test.sh (it takes about two minutes); docs/testing.md names it and
docs/performance.md has its figures.

Usage: .venv/bin/python scripts/drain_fleet.py [--bin target/debug/livetalk] [--apps 30]
       [--rounds 3] [--speed 4]
"""

import argparse
import asyncio
import base64
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import websockets

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

from webrtc_app import WebRtcApp, read_wav  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
TOKEN = "fleet-token"
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_device_status",
                "description": "Gets a device's status.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"device_name": {"type": "STRING"}},
                    "required": ["device_name"],
                },
            },
            {
                "name": "set_device_status",
                "description": "Sets a device's status.",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {
                        "device_name": {"type": "STRING"},
                        "new_status": {"type": "STRING"},
                    },
                },
            },
        ]
    }
]
# The WebSocket apps take text replies: thirty Python apps decoding every reply's audio on
# a two-core machine would measure Python, not the bridge. The WebRTC app hears its replies on
# its track.
CONFIG = {
    "model": "models/gemini-3.8-live",
    "generationConfig": {"responseModalities": ["text"]},
    "tools": TOOLS,
    "inputAudioTranscription": {},
}
VOICE_CONFIG = dict(
    CONFIG, generationConfig={"responseModalities": ["audio"]}, outputAudioTranscription={}
)
# Typed turns, in order; each names what it expects the model to call. The second and fourth
# only make sense to a model that remembers the first and third.
TYPED = [
    ("Is the living room lamp on?", "get_device_status", "living room lamp"),
    ("Turn it on.", "set_device_status", "living room lamp"),
    ("Is the front door lock locked?", "get_device_status", "front door lock"),
    ("Unlock it please.", "set_device_status", "front door lock"),
]
# One breath, so the demo model's voice detection hears one utterance.
PHRASE = "Is the living room lamp on in the evening"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def url_of(process):
    line = process.stdout.readline()
    match = re.search(r"ws://127\.0\.0\.1:(\d+)", line)
    if not match:
        raise SystemExit(f"no URL from {process.args}: {line!r}")
    return match.group(1)


def documented(language):
    page = open(os.path.join(ROOT, "docs", "bridge.md")).read()
    start = page.index(f"```{language}\n") + len(language) + 4
    return page[start : page.index("```", start)]


async def http_get(port, path):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.decode(errors="replace").partition("\r\n\r\n")
    if "transfer-encoding: chunked" in head.lower():
        out, rest = "", body
        while "\r\n" in rest:
            size, rest = rest.split("\r\n", 1)
            size = int(size.strip() or "0", 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return body


async def haproxy_status(stats_port, server):
    try:
        csv = await http_get(stats_port, "/stats;csv")
    except OSError:
        return None
    lines = csv.splitlines()
    header = lines[0].lstrip("# ").split(",")
    for line in lines[1:]:
        row = line.split(",")
        if len(row) > 17 and row[header.index("svname")] == server:
            return row[header.index("status")]
    return None


class Fleet:
    """The mock, the instances (restartable) and HAProxy."""

    def __init__(self, binary, speed, count, scratch):
        self.binary = binary
        self.scratch = scratch
        env = dict(os.environ, LIVETALK_BRIDGE_TOKEN=TOKEN)
        env.pop("GEMINI_API_KEY", None)
        env.pop("GOOGLE_API_KEY", None)
        self.env = env
        self.mock = subprocess.Popen(
            [binary, "mock", "--listen", "127.0.0.1:0", "--speed", str(speed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.mock_url = f"ws://127.0.0.1:{url_of(self.mock)}"
        self.ports = [free_port() for _ in range(count)]
        self.instances = [self.start(i) for i in range(count)]
        self.front, self.stats = free_port(), free_port()
        config = documented("haproxy").replace("bind :3001", f"bind 127.0.0.1:{self.front}")
        servers = "".join(
            f"    server bridge-{i + 1} 127.0.0.1:{port} check\n"
            for i, port in enumerate(self.ports)
        )
        config = re.sub(r"    server bridge-\d .*\n", "", config) + servers
        config += f"\nlisten stats\n    bind 127.0.0.1:{self.stats}\n    stats enable\n    stats uri /stats\n"
        path = os.path.join(scratch, "haproxy.cfg")
        open(path, "w").write(config)
        self.haproxy = subprocess.Popen(
            ["haproxy", "-db", "-f", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"ws://127.0.0.1:{self.front}/?token={TOKEN}"

    def start(self, i):
        process = subprocess.Popen(
            [self.binary, "serve", "--endpoint", self.mock_url, "--log-format", "json"]
            + ["--listen", f"127.0.0.1:{self.ports[i]}", "--drain-timeout", "30"],
            stdout=subprocess.PIPE,
            stderr=open(os.path.join(self.scratch, f"serve-{i}.log"), "a"),
            text=True,
            env=self.env,
        )
        url_of(process)
        return process

    async def all_up(self, timeout=30):
        deadline = time.monotonic() + timeout
        for i in range(len(self.ports)):
            while await haproxy_status(self.stats, f"bridge-{i + 1}") != "UP":
                if time.monotonic() > deadline:
                    raise SystemExit(f"HAProxy never saw bridge-{i + 1} up")
                await asyncio.sleep(0.1)

    def stop(self):
        for process in self.instances + [self.haproxy, self.mock]:
            process.kill()
            process.wait()


class Results:
    def __init__(self):
        self.turns = 0
        self.lost = []
        self.resumed = {}  # drain index → [seconds from SIGTERM to set up again]
        self.drain_started = None
        self.drain_index = None
        self.errors = []
        self.fallbacks = []
        self.peers = 0


class App:
    """One WebSocket app of the fleet (or, with `webrtc`, one whose voice is on a peer
    connection)."""

    def __init__(self, number, fleet, results, phrase, webrtc=False):
        self.number = number
        self.fleet = fleet
        self.results = results
        self.samples, self.rate = phrase
        self.webrtc = webrtc
        self.handle = None
        self.typed = random.Random(number).randrange(len(TYPED))
        self.typed -= self.typed % 2  # start at a question, so "it" has a meaning
        self.link = None
        self.on_track = False
        self.stop = False

    async def connect(self):
        """Opens a connection and sets the session up, resuming the handle (and, on WebRTC,
        connects the peer). An instance drained meanwhile closes it with 1012: then again,
        elsewhere, with the handle that close gave."""
        while True:
            link = WebRtcApp(self.fleet.url, self.rate)
            await link.open()
            payload = {"initialConfig": VOICE_CONFIG if self.webrtc else CONFIG}
            if self.handle:
                payload["handle"] = self.handle
            await link.send("CONNECT_GEMINI", payload)
            self.link = link
            found = await self.next_of(link, 0, ("SETUP_COMPLETE",))
            if found is not None:
                setup = found[1]
                if not setup["payload"]["success"]:
                    raise RuntimeError(f"app {self.number}: setup failed: {setup}")
                if not self.webrtc:
                    return
                await link.offer()
                if await self.next_of(link, 0, ("WEBRTC_ANSWER",)) is not None:
                    try:
                        await link.answered(timeout=60)
                        self.on_track = True
                        self.results.peers += 1
                    except AssertionError as failed:
                        # As livetalk's own client does: the voice goes on the WebSocket.
                        self.results.fallbacks.append(f"app {self.number}: {failed}")
                        self.on_track = False
                    return
            # Drained before it was set up: on to another instance with the handle it gave.
            # (Its moves count once, when it is set up again.)
            if not await self.closed_by_drain():
                raise RuntimeError(f"app {self.number}: closed while connecting")

    def moved(self):
        started = self.results.drain_started
        if started is not None:
            self.results.resumed.setdefault(self.results.drain_index, []).append(
                time.monotonic() - started
            )

    def track_handle(self):
        for message in reversed(self.link.of("SESSION_HANDLE")):
            self.handle = message["payload"].get("handle")
            return

    async def closed_by_drain(self):
        """True when the connection ended with the drain's 1012; keeps the handle it gave."""
        try:
            await self.link.reader
        except websockets.ConnectionClosed:
            pass
        self.track_handle()
        code = self.link.ws.close_code
        await self.link.close()
        return code == 1012

    async def turn(self, spoken):
        """One turn to its end: "done", or "again" when the connection ended first (the turn
        was not taken: it is sent again after reconnecting)."""
        try:
            return await self.one_turn(spoken)
        except websockets.ConnectionClosed:
            return "again"

    async def one_turn(self, spoken):
        link = self.link
        start = first = len(link.messages)
        if spoken:
            if self.webrtc and self.on_track:
                link.mic.say(self.samples)
            else:
                pcm = self.samples.tobytes() + bytes(2 * self.rate)  # a second of silence after
                step = self.rate // 5 * 2  # 100 ms
                for offset in range(0, len(pcm), step):
                    if link.ws.close_code is not None:
                        break
                    data = base64.b64encode(pcm[offset : offset + step]).decode()
                    await link.send(
                        "SEND_REALTIME_INPUT",
                        {"audio": {"mimeType": f"audio/pcm;rate={self.rate}", "data": data}},
                    )
                    await asyncio.sleep(0.1)
        else:
            text, _, _ = TYPED[self.typed]
            await link.send("SEND_MESSAGE", {"parts": [{"text": text}], "turnComplete": True})
        answered = set()
        while True:
            done = await self.next_of(link, start, ("TURN_COMPLETE", "TOOL_CALL", "GEMINI_ERROR"))
            if done is None:
                # The connection ended before the turn's end: not taken, send it again.
                return "again"
            index, message = done
            start = index + 1
            kind = message["type"]
            if kind == "GEMINI_ERROR":
                text = message["payload"]["message"]
                if "was not sent" in text and "draining" in text:
                    continue  # the close follows; the turn goes again
                if "WebRTC" in text:
                    # The peer failed: the voice goes on the WebSocket from the next turn.
                    self.results.fallbacks.append(f"app {self.number}: {text}")
                    self.on_track = False
                    continue
                self.results.errors.append(f"app {self.number}: {text}")
                continue
            if kind == "TOOL_CALL":
                calls = message["payload"]["toolCall"]["functionCalls"]
                if not spoken:
                    _, name, device = TYPED[self.typed]
                    call = calls[0]
                    if call["name"] != name or call["args"].get("device_name") != device:
                        self.results.lost.append(
                            f"app {self.number}: '{TYPED[self.typed][0]}' called {call}"
                        )
                for call in calls:
                    if call["id"] in answered:
                        self.results.errors.append(f"app {self.number}: call {call['id']} twice")
                    answered.add(call["id"])
                await link.send(
                    "SEND_TOOL_RESPONSE",
                    {
                        "toolResponse": {
                            "functionResponses": [
                                {"id": c["id"], "name": c["name"], "response": {"result": "ok"}}
                                for c in calls
                            ]
                        }
                    },
                )
                continue
            # TURN_COMPLETE: a spoken turn must have been heard, a typed one have called.
            if spoken:
                if not self.heard_since(first):
                    self.results.lost.append(f"app {self.number}: a spoken turn unheard")
            elif not answered:
                self.results.lost.append(
                    f"app {self.number}: '{TYPED[self.typed][0]}' got no call (the conversation?)"
                )
            if not spoken:
                self.typed = (self.typed + 1) % len(TYPED)
            self.results.turns += 1
            return "done"

    def heard_since(self, first):
        """The demo model's reply says how much speech it heard ("I heard about 2.1 seconds
        of speech"): its text, or its voice's transcription, whose fragments join without
        spaces."""
        said = ""
        for _, m in self.link.messages[first:]:
            if m["type"] != "CONTENT_MESSAGE":
                continue
            content = m["payload"]["serverContent"]
            said += content.get("outputTranscription", {}).get("text", "")
            for part in content.get("modelTurn", {}).get("parts", []):
                said += part.get("text", "")
        return "seconds of speech" in said

    async def next_of(self, link, start, kinds):
        """The next message of one of `kinds` from index `start`, or None once the
        connection has ended."""
        while True:
            for index in range(start, len(link.messages)):
                _, message = link.messages[index]
                if message["type"] in kinds:
                    return index, message
            start = len(link.messages)
            if link.reader.done():
                return None
            async with link.arrived:
                try:
                    await asyncio.wait_for(link.arrived.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass

    async def run(self):
        await self.connect()
        spoken = self.number % 2 == 0
        while not self.stop:
            outcome = await self.turn(spoken)
            self.track_handle()
            if outcome == "done":
                spoken = not spoken
                await asyncio.sleep(random.uniform(0.2, 1.0))
                if not self.link.reader.done():
                    continue
            # The connection ended: a drain's 1012, then the conversation goes on elsewhere.
            if not await self.closed_by_drain():
                self.results.errors.append(f"app {self.number}: closed without 1012")
            await self.connect()
            self.moved()
        await self.link.send("DISCONNECT_GEMINI")
        await self.link.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "debug", "livetalk"))
    parser.add_argument("--apps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--speed", type=float, default=4.0)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="drain-fleet-")
    phrase_path = os.path.join(scratch, "phrase.wav")
    subprocess.run(["espeak-ng", "-w", phrase_path, "--", PHRASE], check=True)
    phrase = read_wav(phrase_path)
    fleet = Fleet(args.bin, args.speed, 3, scratch)
    results = Results()
    drains = []
    try:
        await fleet.all_up()
        apps = [App(i, fleet, results, phrase, webrtc=(i == 0)) for i in range(args.apps)]
        tasks = [asyncio.ensure_future(app.run()) for app in apps]
        await asyncio.sleep(8)  # every app in conversation
        for round in range(args.rounds):
            index = round % len(fleet.instances)
            process = fleet.instances[index]
            results.drain_index, results.drain_started = round, time.monotonic()
            process.send_signal(signal.SIGTERM)
            while process.poll() is None:
                await asyncio.sleep(0.02)
            took = time.monotonic() - results.drain_started
            drains.append((index, took, process.returncode))
            # The deploy: the instance comes back, HAProxy takes it in, apps talk on.
            fleet.instances[index] = fleet.start(index)
            await fleet.all_up()
            await asyncio.sleep(6)
        for app in apps:
            app.stop = True
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
    finally:
        fleet.stop()

    print(f"{args.apps} apps (one on WebRTC), 3 instances behind HAProxy, mock speed {args.speed}")
    print("| drain | apps moved | drain to exit | drain to resumed: median | p95 | max | exit |")
    print("|---|---|---|---|---|---|---|")
    everyone = []
    for round, (index, took, code) in enumerate(drains):
        times = sorted(results.resumed.get(round, []))
        everyone += times
        if times:
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            figures = f"{statistics.median(times):.2f} s | {p95:.2f} s | {times[-1]:.2f} s"
        else:
            figures = "— | — | —"
        print(f"| instance {index + 1} | {len(times)} | {took:.2f} s | {figures} | {code} |")
    print(f"turns: {results.turns} answered, {len(results.lost)} lost")
    print(f"the WebRTC app's peer connections: {results.peers} (one per connection it made)")
    for line in results.fallbacks:
        print(f"  WebRTC peer not connected, voice on the WebSocket: {line}")
    for line in results.lost + results.errors:
        print("  " + line)
    if results.lost or results.errors or any(code != 0 for _, _, code in drains):
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main())
