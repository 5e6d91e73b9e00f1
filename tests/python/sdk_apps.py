"""Apps on the official Python SDK (google-genai) and the JS SDK (@google/genai, run with node)
talking to a Live server: the proxy tests run each once straight at a server and once through
`livetalk proxy`, and compare what it got. Both SDKs' apps hold the same conversations and
report the same shape (tests/js/live_app.mjs is the JS one):

- `text`: one typed question and its spoken answer;
- `spoken`: speech (16 kHz PCM16) sent in real time as a microphone sends it;
- `tool`: a question the model answers with a tool call the app answers;
- `refused`: a setup the server refuses (TEXT from a native-audio model: 1007);
- `goaway`: a tool turn, the server's `goAway`, a new connection with the resumption handle
  (opened before the old one is closed, as a well-behaved app does), and a turn that needs what
  the first connection said ("turn it on").
"""

import asyncio
import contextlib
import hashlib
import json
import math
import os
import ssl
import struct
import subprocess
import time
from pathlib import Path

from google import genai
from google.genai import errors, types
from proxy_rig import assert_key_went_upstream_only, assert_same_frames
from sdk_app import SMART_HOME_TOOLS

MODEL = "gemini-3.8-live"
CONVERSATIONS = ["text", "spoken", "tool", "goaway"]
JS_APP = Path(__file__).resolve().parent.parent / "js" / "live_app.mjs"
DEADLINE = 30

# The smart-home tools every SDK app of the tests declares (one list, in sdk_app).
TOOLS = SMART_HOME_TOOLS


def speech_pcm():
    """Half a second of a voiced sound (a 150 Hz buzz with harmonics) and 0.8 s of silence, 16 kHz
    PCM16: loud enough for a voice detector's start, silent long enough for its end."""
    rate = 16_000
    voiced = [
        int(6000 * sum(math.sin(2 * math.pi * 150 * k * n / rate) / k for k in range(1, 6)))
        for n in range(rate // 2)
    ]
    samples = voiced + [0] * (rate * 8 // 10)
    return struct.pack(f"<{len(samples)}h", *samples)


def answer(call):
    """What the app's tools answer (the JS app answers the same)."""
    if call.name == "get_device_status":
        return {"device_name": call.args["device_name"], "status": "off"}
    return {"device_name": call.args["device_name"], "status": call.args["new_status"], "ok": True}


class Result:
    """What the app heard and did, over every connection of a conversation."""

    def __init__(self):
        self.transcript = ""
        self.input_transcript = ""
        self.audio = hashlib.sha256()
        self.audio_bytes = 0
        self.calls = []
        self.turns = 0
        self.go_away = False
        self.refused = None

    def as_dict(self):
        return {
            "transcript": self.transcript,
            "inputTranscript": self.input_transcript,
            "audio": self.audio.hexdigest(),
            "audioBytes": self.audio_bytes,
            "calls": self.calls,
            "turns": self.turns,
            "goAway": self.go_away,
            "refused": self.refused,
        }


async def turn(session, result):
    """Reads one model turn to its turnComplete, answering tool calls; the last handle seen."""
    handle = None
    async for message in session.receive():
        update = message.session_resumption_update
        if update and update.new_handle:
            handle = update.new_handle
        if message.tool_call:
            responses = []
            for call in message.tool_call.function_calls:
                result.calls.append([call.name, call.args])
                responses.append(
                    types.FunctionResponse(id=call.id, name=call.name, response=answer(call))
                )
            await session.send_tool_response(function_responses=responses)
        if message.data:
            result.audio.update(message.data)
            result.audio_bytes += len(message.data)
        content = message.server_content
        if content and content.output_transcription and content.output_transcription.text:
            result.transcript += content.output_transcription.text
        if content and content.input_transcription and content.input_transcription.text:
            result.input_transcript += content.input_transcription.text
        if content and content.turn_complete:
            result.turns += 1
            return handle
    raise AssertionError("the connection ended mid-turn")


async def until_go_away(session, result, handle):
    """Reads on after a turn to the goAway; the newest handle."""
    async for message in session.receive():
        update = message.session_resumption_update
        if update and update.new_handle:
            handle = update.new_handle
        if message.go_away:
            result.go_away = True
            return handle
    raise AssertionError("the connection ended before the goAway")


async def say(session, text):
    await session.send_client_content(
        turns=types.Content(role="user", parts=[types.Part(text=text)]), turn_complete=True
    )


def audio_config(**more):
    return types.LiveConnectConfig(
        response_modalities=["AUDIO"], output_audio_transcription={}, **more
    )


async def python_conversation(client, conversation, pcm):
    result = Result()
    live = client.aio.live
    if conversation == "text":
        async with live.connect(model=MODEL, config=audio_config()) as session:
            await say(session, "Hello, who are you?")
            await turn(session, result)
    elif conversation == "tool":
        async with live.connect(model=MODEL, config=audio_config(tools=TOOLS)) as session:
            await say(session, "Is the living room lamp on?")
            await turn(session, result)
    elif conversation == "spoken":
        config = audio_config(input_audio_transcription={})
        async with live.connect(model=MODEL, config=config) as session:
            started = time.monotonic()
            for n, offset in enumerate(range(0, len(pcm), 3200)):  # 100 ms chunks, real time
                await asyncio.sleep(max(0.0, started + n * 0.1 - time.monotonic()))
                await session.send_realtime_input(
                    audio=types.Blob(data=pcm[offset : offset + 3200], mime_type="audio/pcm;rate=16000")
                )
            await turn(session, result)
    elif conversation == "goaway":
        resumption = types.SessionResumptionConfig()
        config = audio_config(tools=TOOLS, session_resumption=resumption)
        async with contextlib.AsyncExitStack() as connections:
            first_connection = await connections.enter_async_context(
                live.connect(model=MODEL, config=config)
            )
            await say(first_connection, "Is the living room lamp on?")
            handle = await turn(first_connection, result)
            handle = await until_go_away(first_connection, result, handle)
            assert handle, "no resumption handle before the goAway"
            # A well-behaved app: the new connection first, then the old one closed.
            resumption = types.SessionResumptionConfig(handle=handle)
            config = audio_config(tools=TOOLS, session_resumption=resumption)
            async with live.connect(model=MODEL, config=config) as second:
                await first_connection.close()
                await say(second, "Turn it on.")
                await turn(second, result)
    elif conversation == "refused":
        # A TEXT reply asked of a native-audio model: the server refuses the setup with 1007.
        model = "gemini-2.5-flash-native-audio-preview-09-2025"
        config = types.LiveConnectConfig(response_modalities=["TEXT"])
        try:
            async with live.connect(model=model, config=config) as session:
                async for _ in session.receive():
                    pass
        except errors.APIError as error:
            result.refused = str(error)  # the code and the server's reason
        else:
            raise AssertionError("the setup was not refused")
    else:
        raise ValueError(conversation)
    return result.as_dict()


def run_python_app(base_url, cert, key, conversation, pcm):
    """The Python app's conversation against `base_url`, trusting `cert` (None: what
    SSL_CERT_FILE names, as the SDK reads it): what it got."""
    options = {"base_url": base_url, "api_version": "v1beta"}
    if cert is not None:
        options["async_client_args"] = {"ssl": ssl.create_default_context(cafile=cert)}
    client = genai.Client(api_key=key, http_options=options)
    return asyncio.run(asyncio.wait_for(python_conversation(client, conversation, pcm), DEADLINE))


def run_js_app(base_url, cert, key, conversation, pcm_file):
    """The JS app's conversation against `base_url`, trusting `cert` through
    NODE_EXTRA_CA_CERTS: what it printed, and its stderr."""
    done = subprocess.run(
        ["node", str(JS_APP), base_url, conversation, str(pcm_file)],
        env={**os.environ, "NODE_EXTRA_CA_CERTS": cert, "LIVE_APP_KEY": key},
        capture_output=True,
        text=True,
        timeout=DEADLINE + 10,
    )
    assert done.returncode == 0, (
        f"the JS app failed (its SDK is installed by `npm ci --prefix tests/js`): {done.stderr}"
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


def run_app(rig, sdk, url, cert, key, conversation):
    """`sdk`'s app (python or js) in `conversation` against `url`; what it got."""
    if sdk == "python-env":
        return run_python_app(url, None, key, conversation, rig.pcm)
    if sdk == "python":
        return run_python_app(url, cert, key, conversation, rig.pcm)
    result, _ = run_js_app(url, cert, key, conversation, rig.pcm_file)
    return result


def run_both_ways(rig, sdk, key, conversation, connections=1):
    """`sdk`'s app in `conversation` straight at the mock, then through the proxy (between the
    rig's capturing relays): what it got each way, and each proxied connection's captures
    (app side, server side), checked to be the same frames with the key sent upstream only."""
    direct = run_app(rig, sdk, rig.direct_url, rig.cert, key, conversation)
    app_before, server_before = len(rig.app_side.captures), len(rig.server_side.captures)
    proxied = run_app(rig, sdk, rig.app_url, rig.cert, key, conversation)
    rig.app_side.wait_done(app_before + connections)
    rig.server_side.wait_done(server_before + connections)
    assert len(rig.app_side.captures) == app_before + connections
    assert len(rig.server_side.captures) == server_before + connections
    pairs = list(zip(rig.app_side.captures[app_before:], rig.server_side.captures[server_before:]))
    for app_side, server_side in pairs:
        assert_same_frames(app_side, server_side)
        assert_key_went_upstream_only(rig, server_side, key)
    return direct, proxied, pairs
