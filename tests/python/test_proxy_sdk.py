"""The official SDKs' apps (google-genai in Python, @google/genai in Node) through
`livetalk proxy` to a Live server (`livetalk mock`): a typed turn, a spoken turn and a tool call.

Each app runs its conversation twice, straight at the mock and through the proxy, and must get
the same: transcripts, the model's audio byte for byte, the tool calls and turns. Capturing
relays on both sides of the proxy (tests/python/proxy_rig.py) see every frame each way; what
left the proxy on one side is what came into it on the other (text or binary, bytes, order,
close code and reason), the path and the key went upstream as the app sent them, and the key is
in nothing the proxy printed, logged or recorded. One mock and one proxy serve the module.
"""

import json
import os
import secrets
import ssl

import pytest
from proxy_rig import Rig
from sdk_apps import run_js_app, run_python_app, speech_pcm


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    folder = tmp_path_factory.mktemp("proxy-sdk")
    rig = Rig(folder)
    rig.pcm_file = os.path.join(str(folder), "speech.pcm")
    rig.pcm = speech_pcm()
    with open(rig.pcm_file, "wb") as f:
        f.write(rig.pcm)
    yield rig
    rig.stop()


def run_app(rig, sdk, url, cert, key, conversation):
    if sdk == "python":
        return run_python_app(url, cert, key, conversation, rig.pcm)
    result, _ = run_js_app(url, cert, key, conversation, rig.pcm_file)
    return result


def assert_same_frames(app_side, server_side):
    """What entered the proxy on one side left it on the other: the path, each direction's
    messages (type, bytes, order) and each side's close."""
    assert server_side.path == app_side.path
    for direction in ("up", "down"):
        sent, passed = app_side.sent(direction), server_side.sent(direction)
        assert len(passed) == len(sent), (direction, len(sent), len(passed))
        for n, (a, b) in enumerate(zip(sent, passed)):
            assert a == b, f"{direction} message {n}: {a[0]} {a[1][:200]!r} became {b[0]} {b[1][:200]!r}"
    assert server_side.closes == app_side.closes


def assert_key_went_upstream_only(rig, capture, key):
    """The key reached the server as the app sent it (header or query), and nothing the proxy
    wrote holds it."""
    sent = capture.path + json.dumps(capture.headers)
    assert key in sent, "the app's key did not reach the server"
    for text in rig.everything_the_proxy_wrote():
        assert key not in text, "the app's key is in the proxy's output, log or recording"


@pytest.mark.parametrize("conversation", ["text", "spoken", "tool"])
@pytest.mark.parametrize("sdk", ["python", "js"])
def test_an_sdk_app_gets_through_the_proxy_what_it_gets_directly(rig, sdk, conversation):
    key = "AIzaTest" + secrets.token_hex(12)
    direct = run_app(rig, sdk, rig.direct_url, rig.cert, key, conversation)
    app_before, server_before = len(rig.app_side.captures), len(rig.server_side.captures)
    proxied = run_app(rig, sdk, rig.app_url, rig.cert, key, conversation)

    assert proxied == direct
    assert direct["turns"] == 1 and direct["audioBytes"] >= 24_000, direct
    if conversation == "tool":
        assert direct["calls"] == [["get_device_status", {"device_name": "living room lamp"}]]
        assert "off" in direct["transcript"].lower(), direct
    if conversation == "spoken":
        assert "seconds of speech" in direct["inputTranscript"], direct

    rig.app_side.wait_done(app_before + 1)
    rig.server_side.wait_done(server_before + 1)
    assert len(rig.app_side.captures) == app_before + 1
    assert len(rig.server_side.captures) == server_before + 1
    app_side, server_side = rig.app_side.captures[-1], rig.server_side.captures[-1]
    assert_same_frames(app_side, server_side)
    assert app_side.closes["up"] == (1000, ""), app_side.closes
    assert_key_went_upstream_only(rig, server_side, key)


@pytest.mark.parametrize("sdk", ["python", "js"])
def test_an_sdk_app_trusts_the_proxys_own_certificate_as_the_guide_says(rig, sdk):
    """Straight at the proxy, trusting the certificate it made and printed (an `ssl` context
    for Python, NODE_EXTRA_CA_CERTS for Node)."""
    assert os.path.isfile(rig.proxy.cert), rig.proxy.cert
    ssl.create_default_context(cafile=rig.proxy.cert)
    key = "AIzaTest" + secrets.token_hex(12)
    direct = run_app(rig, sdk, rig.direct_url, rig.cert, key, "text")
    proxied = run_app(rig, sdk, rig.proxy.url, rig.proxy.cert, key, "text")
    assert proxied == direct
    assert "demo" in direct["transcript"].lower() or direct["transcript"], direct
