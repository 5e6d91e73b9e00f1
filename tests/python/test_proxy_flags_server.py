"""`livetalk proxy` flags what a misbehaving server does to an app on the official Python SDK,
each when it is due.

The mock (a fault scenario) answers every user turn at once with a `turnComplete` that holds
nothing, then goes silent for two seconds after the first words of its real reply, then sends
`goAway` after the reply's `turnComplete` and closes 0.3 s later. The app reads on and never
reconnects: the empty turn, the stalled turn (`--stall-secs 1`) and the ignored `goAway` must
each show in `--headless --json` within a second of when they are due, and stand in the
recording. One mock and one proxy serve the module.
"""

import asyncio
import os
import secrets
import ssl

import pytest
from google import genai
from google.genai import types
from proxy_rig import (
    Rig,
    assert_shown_when_due,
    events_of,
    next_connection,
    recorded_warnings,
    warning_of,
)
from sdk_apps import MODEL

STALL_SECS = 1.0
SCENARIO = """
[[fault]]
at = "user_turn"
every = 1
action = "raw"
text = '{"serverContent": {"turnComplete": true}}'

[[fault]]
at = "reply_text"
every = 1
action = "stall"
secs = 2.0

[[fault]]
at = "turn_complete"
every = 1
action = "go_away"
time_left_secs = 0.3
"""


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    folder = tmp_path_factory.mktemp("proxy-flags-server")
    scenario = os.path.join(str(folder), "faults.toml")
    with open(scenario, "w") as f:
        f.write(SCENARIO)
    rig = Rig(
        folder,
        mock_args=("--scenario", scenario),
        proxy_args=("--stall-secs", str(STALL_SECS)),
        relays=False,
    )
    yield rig
    rig.stop()


def test_an_empty_turn_a_stalled_turn_and_an_ignored_go_away_are_flagged_when_due(rig):
    proxy = rig.proxy
    options = {
        "base_url": proxy.url,
        "api_version": "v1beta",
        "async_client_args": {"ssl": ssl.create_default_context(cafile=proxy.cert)},
    }
    client = genai.Client(api_key="AIzaTest" + secrets.token_hex(12), http_options=options)

    async def app():
        config = types.LiveConnectConfig(response_modalities=["AUDIO"], output_audio_transcription={})
        seen = {"turns": [], "go_away": False, "ended": None}
        async with client.aio.live.connect(model=MODEL, config=config) as session:
            conn = await asyncio.to_thread(next_connection, proxy)
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Hello, who are you?")]),
                turn_complete=True,
            )
            try:
                # An app that reads turn after turn and does nothing about a goAway.
                while True:
                    words = ""
                    async for message in session.receive():
                        content = message.server_content
                        if content and content.output_transcription:
                            words += content.output_transcription.text or ""
                        if message.go_away:
                            seen["go_away"] = True
                    seen["turns"].append(words)
            except Exception as error:  # the server's close after its goAway
                seen["ended"] = error
        return conn, seen

    conn, seen = asyncio.run(asyncio.wait_for(app(), 30))
    assert seen["turns"][0] == "" and "demo model" in "".join(seen["turns"]), seen
    assert seen["go_away"], seen

    empty = warning_of(proxy, conn, "empty_turn", 5)
    stalled = warning_of(proxy, conn, "turn_stalled", 5)
    ignored = warning_of(proxy, conn, "go_away_ignored", 5)
    frames = events_of(proxy, conn, "frame")
    # The empty turnComplete is the mock's one text frame.
    empty_frame = next(f for f in frames if f["dir"] == "recv" and f["type"] == "text")
    assert_shown_when_due(proxy, empty, empty_frame["t"])
    last_output = max(f["t"] for f in frames if f["dir"] == "recv" and f["t"] < stalled["t"])
    assert_shown_when_due(proxy, stalled, last_output + STALL_SECS)
    close = proxy.wait_for(lambda e: e.get("event") == "close" and e.get("conn") == conn, 5, "close")
    assert close["code"] == 1008 and close["by"] == "upstream", close
    assert_shown_when_due(proxy, ignored, close["t"])
    kinds = recorded_warnings(proxy, conn)
    for kind in ("empty_turn", "turn_stalled", "go_away_ignored"):
        assert kind in kinds, kinds
