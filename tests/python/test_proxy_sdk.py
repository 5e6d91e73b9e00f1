"""The official SDKs' apps (google-genai in Python, @google/genai in Node) through
`livetalk proxy` to a Live server (`livetalk mock`): a typed turn, a spoken turn, a tool call
and a setup the server refuses.

Each app runs its conversation twice, straight at the mock and through the proxy, and must get
the same: transcripts, the model's audio byte for byte, the tool calls and turns. Capturing
relays on both sides of the proxy (tests/python/proxy_rig.py) see every frame each way; what
left the proxy on one side is what came into it on the other (text or binary, bytes, order,
close code and reason), the path and the key went upstream as the app sent them, and the key is
in nothing the proxy printed, logged or recorded. One mock and one proxy serve the module.
"""

import os
import secrets

import pytest
from proxy_rig import Rig
from sdk_apps import run_app, run_both_ways, speech_pcm


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


@pytest.mark.parametrize("conversation", ["text", "spoken", "tool"])
@pytest.mark.parametrize("sdk", ["python", "js"])
def test_an_sdk_app_gets_through_the_proxy_what_it_gets_directly(rig, sdk, conversation):
    key = "AIzaTest" + secrets.token_hex(12)
    direct, proxied, [(app_side, _)] = run_both_ways(rig, sdk, key, conversation)

    assert proxied == direct
    assert direct["turns"] == 1 and direct["audioBytes"] >= 24_000, direct
    if conversation == "tool":
        assert direct["calls"] == [["get_device_status", {"device_name": "living room lamp"}]]
        assert "off" in direct["transcript"].lower(), direct
    if conversation == "spoken":
        assert "seconds of speech" in direct["inputTranscript"], direct
    # Python's SDK closes with 1000; Node's `ws` sends a close frame with no code (1005).
    assert app_side.closes["up"] == ((1000, "") if sdk == "python" else (1005, "")), app_side.closes


@pytest.mark.parametrize("sdk", ["python", "js"])
def test_a_setup_the_server_refuses_reaches_the_app_through_the_proxy_as_directly(rig, sdk):
    """The server's close (1007 and its reason) comes to the app unchanged."""
    key = "AIzaTest" + secrets.token_hex(12)
    direct, proxied, [(app_side, _)] = run_both_ways(rig, sdk, key, "refused")
    assert proxied == direct
    assert "1007" in direct["refused"] and "voices" in direct["refused"], direct
    assert app_side.closes["down"][0] == 1007, app_side.closes


@pytest.mark.parametrize("sdk", ["python", "python-env", "js"])
def test_an_sdk_app_trusts_the_proxys_own_certificate_as_the_guide_says(rig, sdk, monkeypatch):
    """Straight at the proxy, trusting the certificate it made and printed (an `ssl` context
    or SSL_CERT_FILE for Python, NODE_EXTRA_CA_CERTS for Node)."""
    # Made in the data folder, for the address it listens on.
    data = rig.proxy.env["XDG_DATA_HOME"]
    assert rig.proxy.cert == os.path.join(data, "livetalk", "proxy-tls", "127.0.0.1", "cert.pem")
    assert rig.proxy.listening["certificate_made"] is True
    key = "AIzaTest" + secrets.token_hex(12)

    def trust(cert):
        if sdk == "python-env":  # the others are given the certificate by run_app
            monkeypatch.setenv("SSL_CERT_FILE", cert)

    trust(rig.cert)
    direct = run_app(rig, sdk, rig.direct_url, rig.cert, key, "text")
    trust(rig.proxy.cert)
    proxied = run_app(rig, sdk, rig.proxy.url, rig.proxy.cert, key, "text")
    assert proxied == direct
    assert direct["transcript"].startswith("Hello! I'm the livetalk demo model"), direct
