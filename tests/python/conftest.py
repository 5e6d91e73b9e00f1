"""Fixtures shared by the Python tests: the livetalk binary, `livetalk serve --offline`
bridges, and spoken phrases made with espeak-ng."""

import os
import re
import subprocess
import tempfile

import pytest

LIVETALK = os.environ.get("LIVETALK_BIN", "target/debug/livetalk")


class Bridge:
    """`livetalk serve --offline` on a free loopback port; stopped with `stop()`."""

    def __init__(self, *extra):
        self.process = subprocess.Popen(
            [LIVETALK, "serve", "--offline", "--listen", "127.0.0.1:0", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.process.stdout.readline()
        match = re.search(r"ws://127\.0\.0\.1:(\d+)", line)
        if not match:
            self.stop()
            raise AssertionError(f"the bridge did not print its URL: {line!r}")
        self.url = f"ws://127.0.0.1:{match.group(1)}"

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def start_bridge(*extra):
    return Bridge(*extra)


@pytest.fixture(scope="module")
def bridge():
    """The bridge as `livetalk serve --offline` starts it (reply audio 4× real time)."""
    server = Bridge()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def realtime_bridge():
    """A bridge whose demo model streams its replies in real time, so a reply is still
    being generated while the app hears it (what barge-in needs)."""
    server = Bridge("--speed", "1")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spoken(tmp_path_factory):
    """`spoken(text)`: the path of a WAV file of espeak-ng saying `text`."""
    folder = tmp_path_factory.mktemp("speech")
    made = {}

    def make(text, name="phrase"):
        if text not in made:
            path = folder / f"{name}{len(made)}.wav"
            subprocess.run(["espeak-ng", "-w", str(path), "--", text], check=True)
            made[text] = str(path)
        return made[text]

    return make


@pytest.fixture(scope="session")
def tls_files():
    """A self-signed certificate for 127.0.0.1 and its key: what a server serves wss:// with
    and the SDK is told to trust."""
    with tempfile.TemporaryDirectory() as folder:
        cert = os.path.join(folder, "cert.pem")
        key = os.path.join(folder, "key.pem")
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                "-keyout", key, "-out", cert, "-days", "2",
                "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        yield cert, key
