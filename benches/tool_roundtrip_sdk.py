#!/usr/bin/env python3
"""The tool round trip of the whole livetalk binary beside the official Python SDK's own
receive-and-respond loop, in one run, over wss on loopback.

A fake Live server (Python `websockets`, TLS with a certificate from a throwaway test CA) answers
`setup`, then sends `toolCall`s for `get_current_time` one at a time and times each until the
matching `toolResponse` is back. Two clients take turns, round by round:

- livetalk: `livetalk --headless --no-audio --endpoint wss://…` (its built-in clock tool
  answers), trusting the CA through SSL_CERT_FILE;
- the SDK loop: `google-genai`'s `client.aio.live.connect(...)` with `http_options.base_url`
  pointed at the server, answering each `tool_call` with `send_tool_response` from inside
  `async for message in session.receive()`: the loop the SDK's documentation shows.

Each round gives each client a fresh connection, warm-up calls, then timed ones; the script
prints each client's p50 and p99 over all timed calls, their CPU time per call (all of the
client's threads, from /proc/PID/task/*/schedstat), and the ratio SDK ÷ livetalk (above 1:
livetalk answers faster).

    .venv/bin/python benches/tool_roundtrip_sdk.py --livetalk target/release/livetalk \\
        --python .venv/bin/python --rounds 5

The server's own share (its encoding, TLS and wake-ups) is in both figures alike; `--floor`
adds a client that is a bare `websockets` loop answering at once, to show it; `--against OLD`
adds another livetalk build, to see what a change did in the same run.
"""

import argparse
import asyncio
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The test CA the voice benchmark makes (webpki takes no self-signed leaf): one piece for both.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_voice import make_ca  # noqa: E402

SDK_CLIENT = r'''
import asyncio, os, sys
from google import genai
from google.genai import types

async def main():
    client = genai.Client(api_key="bench-key", http_options=types.HttpOptions(base_url=sys.argv[1]))
    config = types.LiveConnectConfig(
        response_modalities=["TEXT"],
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="get_current_time", description="The time now.")])],
    )
    async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
        print("connected", flush=True)
        while True:
            async for message in session.receive():
                if message.tool_call:
                    await session.send_tool_response(function_responses=[
                        types.FunctionResponse(id=call.id, name=call.name,
                                               response={"time": "12:00"})
                        for call in message.tool_call.function_calls
                    ])

asyncio.run(main())
'''

FLOOR_CLIENT = r'''
import asyncio, json, ssl, sys
from websockets.asyncio.client import connect

async def main():
    context = ssl.create_default_context(cafile=sys.argv[2])
    async with connect(sys.argv[1] + "/ws", ssl=context, max_size=None) as ws:
        await ws.send(json.dumps({"setup": {"model": "models/gemini-3.8-live"}}))
        await ws.recv()
        print("connected", flush=True)
        async for frame in ws:
            call = json.loads(frame)["toolCall"]["functionCalls"][0]
            await ws.send(json.dumps({"toolResponse": {"functionResponses": [
                {"id": call["id"], "name": call["name"], "response": {"time": "12:00"}}]}}))

asyncio.run(main())
'''


def cpu_seconds(pid):
    """Time on a CPU of every live thread of `pid` so far, from schedstat (nanoseconds, where
    /proc/PID/stat counts in 10 ms ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except OSError:
            continue  # the thread ended between the listing and the reading
    return total / 1e9


class Pump:
    """One client connection's calls: `toolCall` out, the matching `toolResponse` timed."""

    def __init__(self, warm_up, timed):
        self.warm_up, self.timed = warm_up, timed
        self.times = []
        self.cpu = None
        self.client_pid = None
        self.done = asyncio.get_running_loop().create_future()

    async def serve(self, ws):
        try:
            await ws.recv()  # setup
            await ws.send(json.dumps({"setupComplete": {}}))
            cpu_start = None
            for n in range(self.warm_up + self.timed):
                if n == self.warm_up and self.client_pid:
                    cpu_start = cpu_seconds(self.client_pid)
                call_id = f"call-{n}"
                call = json.dumps({"toolCall": {"functionCalls": [
                    {"id": call_id, "name": "get_current_time", "args": {}}]}})
                start = time.perf_counter_ns()
                await ws.send(call)
                while True:
                    frame = await asyncio.wait_for(ws.recv(), 10)
                    message = json.loads(frame)
                    answers = (message.get("toolResponse") or message.get("tool_response") or {})
                    answers = answers.get("functionResponses") or answers.get("function_responses") or []
                    if any(a.get("id") == call_id for a in answers):
                        break
                took = time.perf_counter_ns() - start
                if n >= self.warm_up:
                    self.times.append(took / 1e6)
            if cpu_start is not None:
                self.cpu = (cpu_seconds(self.client_pid) - cpu_start) / self.timed
            self.done.set_result(None)
        except Exception as error:  # noqa: BLE001 - reported with the round
            if not self.done.done():
                self.done.set_exception(error)


async def one_round(kind, args, server_state, url, cert):
    pump = Pump(args.warm_up, args.timed)
    server_state["pump"] = pump
    env = dict(os.environ, SSL_CERT_FILE=cert)
    if kind in ("livetalk", "against"):
        scratch = tempfile.mkdtemp()
        config = os.path.join(scratch, "config.toml")
        open(config, "w").close()
        env.update(LIVETALK_CONFIG=config, HOME=scratch, XDG_DATA_HOME=os.path.join(scratch, "d"),
                   XDG_CONFIG_HOME=os.path.join(scratch, "c"))
        for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "LIVETALK_ENDPOINT"):
            env.pop(name, None)
        binary = args.livetalk if kind == "livetalk" else args.against
        argv = [binary, "--headless", "--no-audio", "--endpoint", url.replace("https", "wss")]
    elif kind == "sdk":
        argv = [args.python, "-c", SDK_CLIENT, url]
    else:
        argv = [args.python, "-c", FLOOR_CLIENT, url.replace("https", "wss"), cert]
    client = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    pump.client_pid = client.pid
    try:
        await asyncio.wait_for(pump.done, 120)
    finally:
        client.stdin.close()
        client.terminate()
        try:
            client.wait(5)
        except subprocess.TimeoutExpired:
            client.kill()
            client.wait()
        if kind in ("livetalk", "against"):
            shutil.rmtree(scratch, ignore_errors=True)
    if client.returncode not in (0, -15) and not pump.times:
        raise SystemExit(f"{kind} failed: {client.stderr.read().decode(errors='replace')}")
    return pump


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--livetalk", default="target/release/livetalk")
    parser.add_argument("--python", default=".venv/bin/python",
                        help="a Python with google-genai (the test setup's venv)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm-up", type=int, default=200)
    parser.add_argument("--timed", type=int, default=1000)
    parser.add_argument("--floor", action="store_true", help="also time a bare websockets client")
    parser.add_argument("--against", help="also time another livetalk build (say the one "
                        "before a change), as the client `against`")
    args = parser.parse_args()

    from websockets.asyncio.server import serve

    folder = tempfile.mkdtemp()
    ca, cert, key = (str(path) for path in make_ca(Path(folder)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    state = {}

    async def handler(ws):
        await state["pump"].serve(ws)

    async with serve(handler, "127.0.0.1", 0, ssl=context, max_size=None,
                     compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        url = f"https://127.0.0.1:{port}"
        kinds = (["livetalk", "sdk"] + (["against"] if args.against else [])
                 + (["floor"] if args.floor else []))
        results = {kind: {"times": [], "p50": [], "cpu": []} for kind in kinds}
        for round_no in range(args.rounds):
            # Each round in the other order, so neither always runs on a machine warmed by the other.
            order = kinds if round_no % 2 == 0 else list(reversed(kinds))
            for kind in order:
                pump = await one_round(kind, args, state, url, ca)
                results[kind]["times"].extend(pump.times)
                results[kind]["p50"].append(statistics.median(pump.times))
                if pump.cpu is not None:
                    results[kind]["cpu"].append(pump.cpu)
                print(f"round {round_no + 1} {kind:8} p50 {statistics.median(pump.times):.3f} ms  "
                      f"p99 {percentile(pump.times, 0.99):.3f} ms", file=sys.stderr, flush=True)
    shutil.rmtree(folder, ignore_errors=True)

    print(f"{args.rounds} rounds of {args.timed} timed calls (after {args.warm_up} warm-up) each, "
          f"over wss on loopback; load before: {os.getloadavg()[0]:.2f}")
    figures = {}
    for kind in kinds:
        times = results[kind]["times"]
        cpu = statistics.median(results[kind]["cpu"]) * 1e6 if results[kind]["cpu"] else float("nan")
        figures[kind] = (percentile(times, 0.5), percentile(times, 0.99), cpu)
        print(f"{kind:8}  p50 {figures[kind][0]:.3f} ms  p99 {figures[kind][1]:.3f} ms  "
              f"CPU {cpu:.0f} µs a call  (round p50s: "
              + ", ".join(f"{p:.3f}" for p in results[kind]["p50"]) + ")")
    sdk = figures["sdk"]
    for kind in [k for k in kinds if k in ("livetalk", "against")]:
        ours = figures[kind]
        print(f"ratio SDK ÷ {kind}: p50 {sdk[0] / ours[0]:.2f}×, p99 {sdk[1] / ours[1]:.2f}×, "
              f"CPU {sdk[2] / ours[2]:.2f}×")


if __name__ == "__main__":
    asyncio.run(main())
