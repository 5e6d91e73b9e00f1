"""`livetalk proxy` flags what an app on the official Python SDK does wrong, each when it is due.

Every misbehaviour here is one the SDK lets an app make: a tool call left unanswered, answered
with an id never issued and then twice, a setup its model refuses (a TEXT reply from a
native-audio model), the deprecated `mediaChunks` the SDK still sends to a model that refuses
them, a microphone faster than real time, and audio whose MIME type declares no rate. Each
warning must show in `--headless --json` within a second of the moment it is due (by the
proxy's own clock, and read from its stdout at once) and stand in the connection's recording.
One mock (plain) and one proxy (`--tool-timeout 1`) serve the module; the raw-WebSocket side
of each flag is tested in Rust.
"""

import asyncio
import secrets
import ssl

import pytest
from google import genai
from google.genai import errors, types
from proxy_rig import (
    Rig,
    assert_shown_when_due,
    events_of,
    next_connection,
    recorded_warnings,
    warning_of,
)
from sdk_apps import MODEL, TOOLS, speech_pcm

TOOL_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    rig = Rig(
        tmp_path_factory.mktemp("proxy-flags-app"),
        proxy_args=("--tool-timeout", str(TOOL_TIMEOUT)),
        relays=False,
    )
    yield rig
    rig.stop()


def client(rig):
    options = {
        "base_url": rig.proxy.url,
        "api_version": "v1beta",
        "async_client_args": {"ssl": ssl.create_default_context(cafile=rig.proxy.cert)},
    }
    return genai.Client(api_key="AIzaTest" + secrets.token_hex(12), http_options=options)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


async def first_tool_call(session):
    async for message in session.receive():
        if message.tool_call:
            return message.tool_call.function_calls[0]
    raise AssertionError("no tool call")


def tool_config():
    return types.LiveConnectConfig(response_modalities=["AUDIO"], tools=TOOLS)


async def ask_lamp(session):
    await session.send_client_content(
        turns=types.Content(role="user", parts=[types.Part(text="Is the living room lamp on?")]),
        turn_complete=True,
    )


def sent_frames(proxy, conn, kind):
    """The app's frames on `conn` holding a `kind` message (a wire name), in order."""
    return [e for e in events_of(proxy, conn, "frame") if e["dir"] == "send" and kind in e["kinds"]]


def test_a_tool_call_the_app_never_answers_is_flagged_when_its_timeout_is_up(rig):
    proxy = rig.proxy

    async def app():
        async with client(rig).aio.live.connect(model=MODEL, config=tool_config()) as session:
            conn = await asyncio.to_thread(next_connection, proxy)
            await ask_lamp(session)
            await first_tool_call(session)
            # The app holds the connection and answers nothing.
            return conn, await asyncio.to_thread(warning_of, proxy, conn, "tool_not_answered", 5)

    conn, warning = run(app())
    call = events_of(proxy, conn, "tool_call")[0]
    assert_shown_when_due(proxy, warning, call["t"] + TOOL_TIMEOUT)
    proxy.wait_for(lambda e: e.get("event") == "close" and e.get("conn") == conn, 10, "close")
    assert "tool_not_answered" in recorded_warnings(proxy, conn)


def test_an_answer_with_an_id_never_issued_and_an_answer_twice_are_flagged_at_once(rig):
    proxy = rig.proxy

    async def app():
        async with client(rig).aio.live.connect(model=MODEL, config=tool_config()) as session:
            conn = await asyncio.to_thread(next_connection, proxy)
            await ask_lamp(session)
            call = await first_tool_call(session)
            answer = {"device_name": "living room lamp", "status": "off"}
            await session.send_tool_response(
                function_responses=[types.FunctionResponse(id="function-call-1", name=call.name, response=answer)]
            )
            unknown = await asyncio.to_thread(warning_of, proxy, conn, "tool_unknown_id", 5)
            right = types.FunctionResponse(id=call.id, name=call.name, response=answer)
            await session.send_tool_response(function_responses=[right])
            await session.send_tool_response(function_responses=[right])
            twice = await asyncio.to_thread(warning_of, proxy, conn, "tool_answered_twice", 5)
            return conn, unknown, twice

    conn, unknown, twice = run(app())
    answers = sent_frames(proxy, conn, "toolResponse")
    assert len(answers) == 3, answers
    assert_shown_when_due(proxy, unknown, answers[0]["t"])
    assert_shown_when_due(proxy, twice, answers[2]["t"])
    proxy.wait_for(lambda e: e.get("event") == "close" and e.get("conn") == conn, 10, "close")
    kinds = recorded_warnings(proxy, conn)
    assert "tool_unknown_id" in kinds and "tool_answered_twice" in kinds, kinds


def test_a_setup_the_model_refuses_is_flagged_with_the_services_reason(rig):
    """A TEXT reply asked of a native-audio model: the service (the mock) closes with 1007."""
    proxy = rig.proxy

    async def app():
        config = types.LiveConnectConfig(response_modalities=["TEXT"])
        model = "gemini-2.5-flash-native-audio-preview-09-2025"
        with pytest.raises(errors.APIError) as refused:
            async with client(rig).aio.live.connect(model=model, config=config) as session:
                async for _ in session.receive():
                    pass
        return refused.value

    refused = run(app())
    assert refused.code == 1007, refused
    conn = next_connection(proxy)
    field = warning_of(proxy, conn, "field_not_accepted", 5)
    setup_refused = warning_of(proxy, conn, "setup_refused", 5)
    assert "voices" in setup_refused["message"], setup_refused
    setup = sent_frames(proxy, conn, "setup")[0]
    close = proxy.wait_for(lambda e: e.get("event") == "close" and e.get("conn") == conn, 5, "close")
    assert close["code"] == 1007, close
    assert_shown_when_due(proxy, field, setup["t"])
    assert_shown_when_due(proxy, setup_refused, close["t"])
    kinds = recorded_warnings(proxy, conn)
    assert "field_not_accepted" in kinds and "setup_refused" in kinds, kinds


# The deprecated call is the point: the SDK's warning about it is expected.
@pytest.mark.filterwarnings("ignore:The `session.send` method is deprecated:DeprecationWarning")
def test_the_deprecated_media_chunks_the_sdk_still_sends_are_flagged_on_a_model_that_refuses_them(rig):
    proxy = rig.proxy
    chunk = speech_pcm()[:3200]

    async def app():
        config = types.LiveConnectConfig(response_modalities=["AUDIO"])
        with pytest.raises(errors.APIError) as refused:
            async with client(rig).aio.live.connect(model=MODEL, config=config) as session:
                conn = await asyncio.to_thread(next_connection, proxy)
                # The SDK's old way, still in its API and in many examples.
                await session.send(
                    input=types.LiveClientRealtimeInput(
                        media_chunks=[types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")]
                    )
                )
                async for _ in session.receive():
                    pass
        return conn, refused.value

    conn, refused = run(app())
    assert refused.code == 1007, refused
    warning = warning_of(proxy, conn, "field_not_accepted", 5)
    assert "media" in warning["message"].lower(), warning
    frame = sent_frames(proxy, conn, "realtimeInput")[0]
    assert_shown_when_due(proxy, warning, frame["t"])
    proxy.wait_for(lambda e: e.get("event") == "close" and e.get("conn") == conn, 5, "close")
    assert "field_not_accepted" in recorded_warnings(proxy, conn)


def test_a_microphone_faster_than_real_time_and_audio_of_no_declared_rate_are_flagged(rig):
    """Three seconds of audio sent at once (the proxy allows a second ahead of the wall
    clock), then a chunk whose MIME type names no rate."""
    proxy = rig.proxy
    pcm = speech_pcm()  # 1.3 s
    chunks = [pcm[i : i + 3200] for i in range(0, len(pcm), 3200)] * 3  # 100 ms each

    async def app():
        config = types.LiveConnectConfig(response_modalities=["AUDIO"])
        async with client(rig).aio.live.connect(model=MODEL, config=config) as session:
            conn = await asyncio.to_thread(next_connection, proxy)
            for chunk in chunks:
                await session.send_realtime_input(
                    audio=types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                )
            fast = await asyncio.to_thread(warning_of, proxy, conn, "audio_too_fast", 5)
            await session.send_realtime_input(audio=types.Blob(data=chunks[0], mime_type="audio/pcm"))
            rate = await asyncio.to_thread(warning_of, proxy, conn, "audio_rate", 5)
            return conn, fast, rate

    conn, fast, rate = run(app())
    audio = sent_frames(proxy, conn, "realtimeInput")
    assert len(audio) == len(chunks) + 1, len(audio)
    # Due at the first chunk that put the audio over a second ahead of the clock since the first.
    start = audio[0]["t"]
    due = next(f["t"] for n, f in enumerate(audio) if (n + 1) * 0.1 > f["t"] - start + 1.0)
    assert_shown_when_due(proxy, fast, due)
    assert_shown_when_due(proxy, rate, audio[-1]["t"])
    proxy.wait_for(lambda e: e.get("event") == "close" and e.get("conn") == conn, 5, "close")
    kinds = recorded_warnings(proxy, conn)
    assert "audio_too_fast" in kinds and "audio_rate" in kinds, kinds
