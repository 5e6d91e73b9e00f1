"""The rig of the proxy tests: a test certificate, `livetalk mock` over wss, `livetalk proxy`
with its `--json` events read as they come, and capturing relays: small WebSocket relays
(the `websockets` package) that pass every frame and close on unchanged and note them, so
the tests see what crossed each side of the proxy independently of the proxy's own recording.
"""

import asyncio
import json
import os
import queue
import re
import ssl
import subprocess
import threading
import time

import websockets
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

LIVETALK = os.environ.get("LIVETALK_BIN", "target/debug/livetalk")

# Headers a relay does not pass on: the WebSocket handshake's own and the hop's.
HOP_HEADERS = {
    "host", "connection", "upgrade", "content-length", "sec-websocket-key",
    "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-accept",
}


def make_certificate(folder):
    """A test authority and a server certificate it signed for 127.0.0.1, in `folder`:
    (the authority's certificate, which clients trust; the server's certificate; its key).
    rustls, as livetalk uses it, takes no authority's own certificate as a server's."""
    def path(name):
        return os.path.join(folder, name)

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *curve, "-keyout", path("ca-key.pem"), "-out", path("ca.pem"),
            "-days", "2", "-subj", "/CN=livetalk test authority")
    openssl("req", "-new", *curve, "-keyout", path("key.pem"), "-out", path("server.csr"),
            "-subj", "/CN=127.0.0.1")
    with open(path("server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey",
            path("ca-key.pem"), "-CAcreateserial", "-out", path("cert.pem"), "-days", "2",
            "-extfile", path("server.ext"))
    return path("ca.pem"), path("cert.pem"), path("key.pem")


class Mock:
    """`livetalk mock` over wss on a free port, its output in a file."""

    def __init__(self, folder, cert, key, *extra):
        self.log = os.path.join(folder, "mock.log")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [LIVETALK, "mock", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
                 "--speed", "20", *extra],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "NO_COLOR": "1"},
            )
        line = self.process.stdout.readline()
        match = re.search(r"wss://127\.0\.0\.1:(\d+)", line)
        if not match:
            self.stop()
            raise AssertionError(f"the mock did not print a wss URL: {line!r}")
        self.port = int(match.group(1))

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


class Proxy:
    """`livetalk proxy --headless --json` on a free loopback port, its home in `folder` (the
    self-signed certificate, the log), recording into `folder/recordings`. Its stdout's JSON
    lines are read as they come into `events`; other lines into `lines`."""

    def __init__(self, folder, upstream, env=None, *extra):
        self.folder = folder
        self.recordings = os.path.join(folder, "recordings")
        self.stderr_path = os.path.join(folder, "proxy.stderr")
        home = os.path.join(folder, "home")
        os.makedirs(home, exist_ok=True)
        self.env = {
            **os.environ,
            "HOME": home,
            "XDG_DATA_HOME": os.path.join(home, "data"),
            "XDG_CONFIG_HOME": os.path.join(home, "config"),
            "XDG_STATE_HOME": os.path.join(home, "state"),
            "NO_COLOR": "1",
            "LIVETALK_LOG": "debug",
            **(env or {}),
        }
        for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
            self.env.pop(name, None)
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [LIVETALK, "proxy", "--listen", "127.0.0.1:0", "--endpoint", upstream,
                 "--record", self.recordings, "--headless", "--json", *extra],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=self.env,
            )
        self.events = queue.Queue()
        self.seen = []
        self.lines = []
        self.started = threading.Event()
        self.port = None
        self.cert = None
        self.listening = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self.started.wait(20) or self.port is None:
            self.stop()
            raise AssertionError(f"the proxy did not say where it listens: {self.lines!r} {self.stderr()}")

    def _read(self):
        for line in self.process.stdout:
            stamp = time.monotonic()
            line = line.rstrip("\n")
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if isinstance(event, dict):
                event["_seen_at"] = stamp
                if event.get("event") == "listening":
                    # {"event":"listening","address":"127.0.0.1:N",...,"certificate":PATH}
                    self.port = int(event["address"].rsplit(":", 1)[1])
                    self.cert = event.get("certificate")
                    self.listening = event
                    self.started.set()
                self.events.put(event)
            else:
                self.lines.append(line)
        self.started.set()

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def wait_for(self, predicate, deadline=10.0, what="an event"):
        """The first event so far or within `deadline` seconds that `predicate` accepts."""
        end = time.monotonic() + deadline
        index = 0
        while True:
            while index < len(self.seen):
                if predicate(self.seen[index]):
                    return self.seen[index]
                index += 1
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {deadline} s; events: {self.seen[-20:]!r}")
            try:
                self.seen.append(self.events.get(timeout=left))
            except queue.Empty:
                continue

    def drain(self):
        """Every event read so far."""
        while True:
            try:
                self.seen.append(self.events.get_nowait())
            except queue.Empty:
                return list(self.seen)

    def stderr(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Capture:
    """What crossed a relay in one connection: the path asked for, the headers, every message
    each way as (direction, "text"|"binary", bytes) in order per direction, and each side's
    close (code, reason) or None for a connection dropped without one."""

    def __init__(self, path, headers):
        self.path = path
        self.headers = headers
        self.frames = []
        self.closes = {}
        self.done = threading.Event()

    def sent(self, direction):
        return [(kind, data) for d, kind, data in self.frames if d == direction]


class Relay:
    """A capturing WebSocket relay on a free loopback port (wss with `cert`/`key`) to
    `upstream` (a wss base URL trusted through `upstream_ca`), run on its own event loop in a
    thread. Each connection's path and query and its headers (but the handshake's own) go
    upstream as they came; messages go on unchanged each way; a close goes on with its code and
    reason, a drop as a drop. `captures` lists the connections in the order they came."""

    def __init__(self, cert, key, upstream, upstream_ca):
        self.upstream = upstream
        self.server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_tls.load_cert_chain(cert, key)
        self.upstream_ca = upstream_ca
        self.captures = []
        self.changed = threading.Condition()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.port = None

        async def start():
            self.server = await serve(
                self._handle, "127.0.0.1", 0, ssl=self.server_tls, compression=None,
                max_size=None, ping_interval=None, process_request=None,
            )
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(start())
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        assert ready.wait(10), "the relay did not start"

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def set_upstream(self, upstream, upstream_ca):
        self.upstream = upstream
        self.upstream_ca = upstream_ca

    async def _handle(self, app):
        request = app.request
        headers = [(k, v) for k, v in request.headers.raw_items() if k.lower() not in HOP_HEADERS]
        capture = Capture(request.path, headers)
        with self.changed:
            self.captures.append(capture)
            self.changed.notify_all()
        context = ssl.create_default_context(cafile=self.upstream_ca)
        try:
            async with connect(
                self.upstream + request.path, ssl=context, additional_headers=headers,
                user_agent_header=None, compression=None, max_size=None, ping_interval=None,
                open_timeout=10,
            ) as server:
                await asyncio.gather(
                    self._pump(app, server, "up", capture),
                    self._pump(server, app, "down", capture),
                )
        except (OSError, websockets.InvalidHandshake) as error:
            capture.closes["refused"] = repr(error)
            await app.close(1011, "relay: upstream refused")
        finally:
            with self.changed:
                capture.done.set()
                self.changed.notify_all()

    @staticmethod
    async def _pump(source, sink, direction, capture):
        try:
            async for message in source:
                kind = "text" if isinstance(message, str) else "binary"
                data = message.encode() if isinstance(message, str) else bytes(message)
                capture.frames.append((direction, kind, data))
                try:
                    await sink.send(message)
                except ConnectionClosed:
                    # The other side is closing: this side is read on to its own close.
                    pass
        except ConnectionClosed:
            pass
        received = source.protocol.close_rcvd
        if direction not in capture.closes:
            capture.closes[direction] = (received.code, received.reason) if received else None
        if received is None:
            sink.transport.abort()
        else:
            code = None if received.code == 1005 else received.code
            await sink.close(code, received.reason)

    def stop(self):
        async def stop():
            self.server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def wait_done(self, count, deadline=10.0):
        """Waits until `count` connections came and all of them ended."""
        with self.changed:
            ended = self.changed.wait_for(
                lambda: len(self.captures) >= count and all(c.done.is_set() for c in self.captures),
                deadline,
            )
        assert ended, f"of {count} connections, {len(self.captures)} came, not all ended"


class Rig:
    """One test module's set-up: the mock (with `mock_args`, e.g. a scenario), a relay before
    it, `livetalk proxy` to that relay, and a relay before the proxy. An app dials `app_url`
    (trusting `cert`) to go through the proxy, or `direct_url` to talk to the mock directly."""

    def __init__(self, folder, mock_args=(), proxy_args=(), relays=True):
        folder = str(folder)
        self.folder = folder
        # Apps and the proxy trust `cert` (the authority), the servers show its server certificate.
        self.cert, server_cert, self.key = make_certificate(folder)
        self.mock = Mock(folder, server_cert, self.key, *mock_args)
        self.direct_url = f"https://127.0.0.1:{self.mock.port}"
        self.server_side = self.app_side = None
        upstream = f"wss://127.0.0.1:{self.mock.port}"
        if relays:
            self.server_side = Relay(server_cert, self.key, upstream, self.cert)
            upstream = f"wss://127.0.0.1:{self.server_side.port}"
        # The proxy trusts the mock's (the relay's) certificate as livetalk trusts a company CA.
        self.proxy = Proxy(folder, upstream, {"SSL_CERT_FILE": self.cert}, *proxy_args)
        if relays:
            self.app_side = Relay(
                server_cert, self.key, f"wss://127.0.0.1:{self.proxy.port}", self.proxy.cert
            )
            self.app_url = self.app_side.url

    def stop(self):
        for part in (self.app_side, self.proxy, self.server_side, self.mock):
            if part is not None:
                part.stop()

    def everything_the_proxy_wrote(self):
        """The proxy's stdout and stderr, and every file it wrote (its log, its recordings)."""
        texts = ["\n".join(self.proxy.lines), json.dumps(self.proxy.drain()), self.proxy.stderr()]
        for root in (self.proxy.env["HOME"], self.proxy.recordings):
            for folder, _, files in os.walk(root):
                for name in files:
                    with open(os.path.join(folder, name), "rb") as f:
                        texts.append(f.read().decode("latin-1"))
        return texts


def next_connection(proxy, deadline=10.0):
    """The number of the next app connection the proxy opened (one no test took yet)."""
    taken = proxy.__dict__.setdefault("taken", set())
    conn = proxy.wait_for(
        lambda e: e.get("event") == "open" and e["conn"] not in taken, deadline, "connection"
    )["conn"]
    taken.add(conn)
    return conn


def warning_of(proxy, conn, kind, deadline=10.0):
    """The next `kind` warning on connection `conn`, within `deadline` seconds."""
    return proxy.wait_for(
        lambda e: e.get("event") == "warning" and e.get("conn") == conn and e.get("kind") == kind,
        deadline,
        f"{kind} warning on connection {conn}",
    )


def events_of(proxy, conn, name):
    """The events named `name` on connection `conn` seen so far, in order."""
    return [e for e in proxy.drain() if e.get("conn") == conn and e.get("event") == name]


def assert_shown_when_due(proxy, warning, due):
    """The warning came within a second of `due` (the proxy's clock, seconds since its start),
    not before it, and reached the proxy's stdout reader at once."""
    assert due - 0.05 <= warning["t"] <= due + 1.0, (warning, due)
    # The proxy's clock on the test's: no line is read before it is written, so the smallest
    # difference of the two clocks over all lines is at most the real one.
    offset = min(e["_seen_at"] - e["t"] for e in proxy.drain() if "t" in e)
    assert warning["_seen_at"] - offset - warning["t"] < 0.5, warning


def recorded_warnings(proxy, conn):
    """The kinds of the warnings in connection `conn`'s recording (`DIR/<time>-<conn>/`), which
    `livetalk inspect` must count the same."""
    folders = [f for f in os.listdir(proxy.recordings) if f.endswith(f"-{conn}")]
    assert len(folders) == 1, (conn, os.listdir(proxy.recordings))
    folder = os.path.join(proxy.recordings, folders[0])

    def kind(message):
        match = re.search(r"\[([a-z_]+)\]\s*$", message)
        return match.group(1) if match else message

    with open(os.path.join(folder, "session.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    kinds = [kind(r.get("message", "")) for r in records if r.get("type") == "warning"]
    inspected = subprocess.run(
        [LIVETALK, "inspect", folder, "--json"], capture_output=True, text=True, timeout=30,
        env=proxy.env,
    )
    assert inspected.returncode == 0, inspected.stderr
    assert [kind(w) for w in json.loads(inspected.stdout)["warnings"]] == kinds, inspected.stdout
    return kinds


def assert_same_frames(app_side, server_side):
    """What entered the proxy on one side left it on the other: the path, each direction's
    messages (type, bytes, order) and each side's close."""
    assert server_side.path == app_side.path
    for direction in ("up", "down"):
        sent, passed = app_side.sent(direction), server_side.sent(direction)
        assert len(passed) == len(sent), (direction, len(sent), len(passed))
        for n, (a, b) in enumerate(zip(sent, passed)):
            assert a == b, f"{direction} message {n}: {a[0]} {a[1][:200]!r} became {b[0]} {b[1][:200]!r}"
    assert server_side.closes == app_side.closes, (app_side.closes, server_side.closes)


def assert_key_went_upstream_only(rig, capture, key):
    """The key reached the server as the app sent it (header or query), and nothing the proxy
    wrote holds it."""
    sent = capture.path + json.dumps(capture.headers)
    assert key in sent, "the app's key did not reach the server"
    recordings = [f for _, _, files in os.walk(rig.proxy.recordings) for f in files]
    assert "session.jsonl" in recordings, "the proxy recorded nothing"
    for text in rig.everything_the_proxy_wrote():
        assert key not in text, "the app's key is in the proxy's output, log or recording"
