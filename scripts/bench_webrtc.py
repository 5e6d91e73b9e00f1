#!/usr/bin/env python3
"""Runs N concurrent WebRTC app sessions (aiortc, as tests/python/test_webrtc.py does)
against `livetalk serve --offline`, each completing one spoken turn, and reports the bridge
process's CPU time and memory per session. Not part of scripts/test.sh.

Usage: .venv/bin/python scripts/bench_webrtc.py [--sessions 20] [--bin target/debug/livetalk]
(build with `cargo build --release` and pass --bin target/release/livetalk for the figures
the performance page quotes).
"""

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

from conftest import Bridge  # noqa: E402
import conftest  # noqa: E402
from webrtc_app import loud_span, spoken_turn  # noqa: E402

PHRASE = "Is the living room lamp on? Please tell me."


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def kib(value):
    return int(value.split()[0])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        parts = stat.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--bin", default=conftest.LIVETALK)
    args = parser.parse_args()
    conftest.LIVETALK = args.bin

    folder = tempfile.mkdtemp()
    phrase = os.path.join(folder, "phrase.wav")
    subprocess.run(["espeak-ng", "-w", phrase, "--", PHRASE], check=True)

    bridge = Bridge()
    pid = bridge.process.pid
    try:
        idle_rss = kib(proc_status(pid)["VmRSS"])
        cpu_before = cpu_seconds(pid)
        started = time.monotonic()
        results = await asyncio.gather(
            *(spoken_turn(bridge.url, phrase, timeout=60) for _ in range(args.sessions)),
            return_exceptions=True,
        )
        wall = time.monotonic() - started
        cpu = cpu_seconds(pid) - cpu_before
        status = proc_status(pid)
    finally:
        bridge.stop()

    done = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    heard = [app.heard_seconds() for app, _ in done]
    replies = [loud_span(app.speaker.samples, 48000) for app, _ in done]
    peak = kib(status["VmHWM"])
    print(f"sessions: {args.sessions}, completed: {len(done)}, failed: {len(failed)}")
    for failure in failed[:3]:
        print(f"  failure: {failure!r}")
    print(f"wall time: {wall:.1f} s; phrase heard as {heard[:1]} s; replies heard: "
          f"{min(replies, default=0):.1f}–{max(replies, default=0):.1f} s")
    print(f"bridge CPU: {cpu:.2f} s in all, {cpu / max(1, args.sessions):.3f} s per session "
          f"({100 * cpu / wall / max(1, args.sessions):.1f} % of a core per session while running)")
    print(f"bridge memory: {idle_rss / 1024:.1f} MiB idle, peak {peak / 1024:.1f} MiB, "
          f"{(peak - idle_rss) / 1024 / max(1, args.sessions):.2f} MiB per session")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
