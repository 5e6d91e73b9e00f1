#!/usr/bin/env python3
"""What `livetalk proxy` costs an app, measured beside the same app talking directly, in one run.

1. Added delay per frame. A Live server stand-in (a `websockets` server in its own process,
   over wss) answers every message at once with a model audio chunk as the service sends it
   (JSON in a binary frame). One app makes round trips alternately straight to it and through
   the proxy (app -wss- proxy -wss- server), a `realtimeInput` audio chunk up and an answer
   down, so both paths meet the same load at the same moments. A round trip through the proxy
   crosses it twice: the delay it adds per frame is half the difference of the round trips at
   each percentile (p50, p99).
2. 50 concurrent app sessions through the proxy, each a microphone at real time (20 ms chunks
   of 16 kHz audio up) and the model speaking at real time (40 ms chunks of 24 kHz down), for a
   steady window: the proxy's CPU (its utime+stime over the window, per session) and memory
   (resident set over the idle proxy's, per session), read from /proc.

    scripts/bench_proxy.py [--livetalk target/release/livetalk] [--round-trips 4000]
                           [--sessions 50] [--window 10]

Run it on a quiet machine (`uptime`); it prints the load average beside its figures.
"""

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import websockets
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

HERE = os.path.dirname(os.path.abspath(__file__))
# The proxy tests' rig makes the test authority and the server's certificate.
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from proxy_rig import make_certificate  # noqa: E402
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = json.dumps({"setup": {"model": "models/gemini-3.8-live",
                              "generationConfig": {"responseModalities": ["AUDIO"]}}})


def mic_chunk(ms):
    """A `realtimeInput` message of `ms` of 16 kHz PCM16 (a quiet ramp, not silence)."""
    samples = bytes((n * 7) & 0x3F for n in range(32 * ms))
    return json.dumps({"realtimeInput": {"audio": {
        "data": base64.b64encode(samples).decode(), "mimeType": "audio/pcm;rate=16000"}}})


def model_chunk(ms):
    """A `serverContent` of `ms` of 24 kHz PCM16, pretty-printed JSON in a binary frame."""
    samples = bytes((n * 5) & 0x3F for n in range(48 * ms))
    return json.dumps({"serverContent": {"modelTurn": {"parts": [{"inlineData": {
        "mimeType": "audio/pcm;rate=24000", "data": base64.b64encode(samples).decode()}}]}}},
        indent=2).encode()


def server_process(cert, key, port_out, streaming):
    """The Live server stand-in: `setupComplete`, then an audio chunk for every message
    (`streaming` False), or model audio at real time for as long as the app stays."""
    async def handle(ws):
        await ws.recv()
        await ws.send(json.dumps({"setupComplete": {}}).encode())
        if not streaming:
            answer = model_chunk(20)
            async for _ in ws:
                await ws.send(answer)
            return
        answer = model_chunk(40)

        async def speak():
            start = time.monotonic()
            n = 0
            while True:
                n += 1
                await asyncio.sleep(max(0.0, start + n * 0.04 - time.monotonic()))
                await ws.send(answer)

        speaker = asyncio.create_task(speak())
        try:
            async for _ in ws:
                pass
        finally:
            speaker.cancel()

    async def main():
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        async with serve(handle, "127.0.0.1", 0, ssl=tls, compression=None, max_size=None,
                         ping_interval=None) as server:
            port_out.put(server.sockets[0].getsockname()[1])
            await asyncio.Future()

    asyncio.run(main())


def start_server(cert, key, streaming):
    ports = multiprocessing.Queue()
    process = multiprocessing.Process(target=server_process, args=(cert, key, ports, streaming),
                                      daemon=True)
    process.start()
    return process, ports.get(timeout=20)


class Proxy:
    """`livetalk proxy` to `upstream`, its home in a temporary folder; prints the listening
    port and the certificate it made, which this reads from its first lines."""

    def __init__(self, livetalk, upstream, cert, folder):
        home = os.path.join(folder, "home")
        os.makedirs(home, exist_ok=True)
        env = {**os.environ, "HOME": home, "XDG_DATA_HOME": os.path.join(home, "data"),
               "XDG_CONFIG_HOME": os.path.join(home, "config"), "SSL_CERT_FILE": cert,
               "NO_COLOR": "1"}
        self.process = subprocess.Popen(
            [livetalk, "proxy", "--listen", "127.0.0.1:0", "--endpoint", upstream,
             "--headless", "--max-connections", "1000"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.port = self.cert = None
        seen = []
        found = threading.Event()

        def read():
            # `livetalk proxy listening on 127.0.0.1:N (...)`, then the certificate's path;
            # then whatever it prints is drained so it never blocks on a full pipe.
            for line in self.process.stdout:
                if not found.is_set():
                    seen.append(line)
                    port = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
                    pem = re.search(r"(/\S+\.pem)", line)
                    self.port = self.port or (port and int(port.group(1)))
                    self.cert = self.cert or (pem and pem.group(1))
                    if self.port and self.cert:
                        found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(20) or self.port is None or self.cert is None:
            self.process.kill()
            sys.exit(f"bench_proxy: the proxy did not print its address and certificate: {seen}")

    def cpu_seconds(self):
        fields = open(f"/proc/{self.process.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self):
        status = open(f"/proc/{self.process.pid}/status").read()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def round_trips(direct_url, proxy_url, server_tls, proxy_tls, count):
    """Round trips alternately direct and through the proxy; each path's times in ms."""
    message = mic_chunk(20)
    headers = {"x-goog-api-key": "bench-key-not-real"}
    options = dict(compression=None, max_size=None, ping_interval=None,
                   additional_headers=headers)
    async with connect(direct_url + PATH, ssl=server_tls, **options) as direct, \
            connect(proxy_url + PATH, ssl=proxy_tls, **options) as proxied:
        for ws in (direct, proxied):
            await ws.send(SETUP)
            await ws.recv()
        times = {"direct": [], "proxy": []}
        warmup = 200
        for n in range(count + warmup):
            for name, ws in (("direct", direct), ("proxy", proxied)) if n % 2 else \
                    (("proxy", proxied), ("direct", direct)):
                start = time.perf_counter_ns()
                await ws.send(message)
                await ws.recv()
                if n >= warmup:
                    times[name].append((time.perf_counter_ns() - start) / 1e6)
        return times


def app_sessions(proxy_url, proxy_cert, sessions, seconds, ready, results):
    """`sessions` apps at once, each a microphone at real time for `seconds` after all are
    connected; puts how many model chunks they got."""
    async def one(started):
        tls = ssl.create_default_context(cafile=proxy_cert)
        message = mic_chunk(20)
        got = 0
        async with connect(proxy_url + PATH, ssl=tls, compression=None, max_size=None,
                           ping_interval=None,
                           additional_headers={"x-goog-api-key": "bench-key"}) as ws:
            await ws.send(SETUP)
            await ws.recv()
            connected.append(1)
            if len(connected) == sessions:
                ready.set()
                started.set()
            await started.wait()

            async def listen():
                nonlocal got
                async for _ in ws:
                    got += 1

            listener = asyncio.create_task(listen())
            start = time.monotonic()
            n = 0
            while time.monotonic() - start < seconds:
                n += 1
                await ws.send(message)
                await asyncio.sleep(max(0.0, start + n * 0.02 - time.monotonic()))
            listener.cancel()
        return got

    connected = []

    async def main():
        started = asyncio.Event()
        return await asyncio.gather(*(one(started) for _ in range(sessions)))

    results.put(sum(asyncio.run(main())))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--livetalk", default=os.path.join(HERE, "..", "target", "debug", "livetalk"))
    parser.add_argument("--round-trips", type=int, default=4000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    build = "release" if "release" in os.path.abspath(args.livetalk) else "debug"
    print(f"livetalk proxy benchmark: {args.livetalk} ({build} build); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")

    with tempfile.TemporaryDirectory() as folder:
        ca, cert, key = make_certificate(folder)
        # 1. Added delay per frame.
        server, port = start_server(cert, key, streaming=False)
        proxy = Proxy(args.livetalk, f"wss://127.0.0.1:{port}", ca, folder)
        try:
            server_tls = ssl.create_default_context(cafile=ca)
            proxy_tls = ssl.create_default_context(cafile=proxy.cert)
            times = asyncio.run(asyncio.wait_for(round_trips(
                f"wss://127.0.0.1:{port}", f"wss://127.0.0.1:{proxy.port}", server_tls, proxy_tls,
                args.round_trips), 600))
        finally:
            proxy.stop()
            server.terminate()
        print(f"\nround trips ({args.round_trips} each path, alternating; a round trip is one "
              f"frame up and one down):")
        print(f"  {'':8} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
        for name in ("direct", "proxy"):
            t = times[name]
            print(f"  {name:8} {percentile(t, 50):8.3f} {percentile(t, 99):8.3f} "
                  f"{statistics.fmean(t):8.3f}")
        added = {p: (percentile(times["proxy"], p) - percentile(times["direct"], p)) / 2
                 for p in (50, 99)}
        ratio = percentile(times["proxy"], 50) / percentile(times["direct"], 50)
        print(f"  added per frame: p50 {added[50]:.3f} ms, p99 {added[99]:.3f} ms "
              f"(goal 0.2 and 1); proxy/direct round trip at p50 {ratio:.2f}x")

        # 2. Concurrent sessions.
        server, port = start_server(cert, key, streaming=True)
        proxy = Proxy(args.livetalk, f"wss://127.0.0.1:{port}", ca, folder)
        try:
            idle_rss = proxy.rss_kib()
            ready, results = multiprocessing.Event(), multiprocessing.Queue()
            apps = multiprocessing.Process(target=app_sessions, args=(
                f"wss://127.0.0.1:{proxy.port}", proxy.cert, args.sessions, args.window, ready,
                results), daemon=True)
            apps.start()
            if not ready.wait(60):
                sys.exit("bench_proxy: the sessions did not all connect within 60 s")
            cpu0, wall0 = proxy.cpu_seconds(), time.monotonic()
            peak = idle_rss
            while time.monotonic() - wall0 < args.window:
                time.sleep(0.25)
                peak = max(peak, proxy.rss_kib())
            cpu = proxy.cpu_seconds() - cpu0
            wall = time.monotonic() - wall0
            chunks = results.get(timeout=60)
            apps.join(10)
        finally:
            proxy.stop()
            server.terminate()
        n = args.sessions
        print(f"\n{n} concurrent sessions for {wall:.1f} s (each 50 mic frames/s up, 25 model "
              f"frames/s down; {chunks} model frames reached the apps):")
        print(f"  proxy CPU: {100 * cpu / wall:.1f}% of a core in all, "
              f"{100 * cpu / wall / n:.2f}% per session")
        print(f"  proxy memory: idle {idle_rss / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, "
              f"{(peak - idle_rss) / n:.0f} KiB per session")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
