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
from proxy_rig import Rig
from sdk_apps import run_both_ways


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
    direct, proxied, _ = run_both_ways(rig, sdk, key, "goaway", connections=2)

    assert proxied == direct
    assert direct["goAway"] and direct["turns"] == 2, direct
    assert direct["calls"] == [
        ["get_device_status", {"device_name": "living room lamp"}],
        ["set_device_status", {"device_name": "living room lamp", "new_status": "on"}],
    ], direct
    flagged = [e for e in rig.proxy.drain() if e.get("kind") == "go_away_ignored"]
    assert not flagged, flagged
