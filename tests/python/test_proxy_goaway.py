"""A `goAway` with resumption, the official SDKs' apps through `livetalk proxy`.

The mock sends `goAway` after every other turn (the first turn of each conversation: each has
two). The app opens a new connection with the last resumption handle, closes the old one, and
asks "turn it on": the resumed session still knows which device "it" is. Through the proxy the
app gets what it gets directly, each of its two connections crosses the proxy unchanged (the
capturing relays on both sides), and the key is in nothing the proxy wrote. The proxy flags no
`goAway` the app answered by reconnecting. One mock and one proxy serve the module.
"""

import os
import secrets

import pytest
from proxy_rig import Rig, assert_key_went_upstream_only, assert_same_frames
from sdk_apps import run_app


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    folder = tmp_path_factory.mktemp("proxy-goaway")
    scenario = os.path.join(str(folder), "goaway.toml")
    with open(scenario, "w") as f:
        # The close after it is 10 s away: the app always leaves first.
        f.write('[[fault]]\nat = "turn_complete"\nnth = 1\nevery = 2\naction = "go_away"\ntime_left_secs = 10.0\n')
    rig = Rig(folder, mock_args=("--scenario", scenario))
    rig.pcm, rig.pcm_file = b"", os.devnull
    yield rig
    rig.stop()


@pytest.mark.parametrize("sdk", ["python", "js"])
def test_an_sdk_app_resumes_after_a_go_away_through_the_proxy_as_directly(rig, sdk):
    key = "AIzaTest" + secrets.token_hex(12)
    direct = run_app(rig, sdk, rig.direct_url, rig.cert, key, "goaway")
    app_before, server_before = len(rig.app_side.captures), len(rig.server_side.captures)
    proxied = run_app(rig, sdk, rig.app_url, rig.cert, key, "goaway")

    assert proxied == direct
    assert direct["goAway"] and direct["turns"] == 2, direct
    assert direct["calls"] == [
        ["get_device_status", {"device_name": "living room lamp"}],
        ["set_device_status", {"device_name": "living room lamp", "new_status": "on"}],
    ], direct

    rig.app_side.wait_done(app_before + 2)
    rig.server_side.wait_done(server_before + 2)
    app_side, server_side = rig.app_side.captures[-2:], rig.server_side.captures[-2:]
    assert len(rig.app_side.captures) == app_before + 2
    for before, after in zip(app_side, server_side):
        assert_same_frames(before, after)
        assert_key_went_upstream_only(rig, after, key)
    flagged = [e for e in rig.proxy.drain() if e.get("kind") == "go_away_ignored"]
    assert not flagged, flagged
