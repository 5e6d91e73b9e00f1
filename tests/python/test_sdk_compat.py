"""The official google-genai Python SDK against `livetalk mock` over wss://.

The SDK always dials wss, so the mock runs with a self-signed certificate
for 127.0.0.1, and the SDK trusts it through its documented `async_client_args={"ssl": ctx}`.
"""

import asyncio
import os
import re
import subprocess
import tempfile

import pytest
from google.genai import types

from sdk_app import SMART_HOME_TOOLS, client_for

LIVETALK = os.environ.get("LIVETALK_BIN", "target/debug/livetalk")


class Mock:
    """`livetalk mock` over wss, its debug log (which names each upgrade's path) in a file."""

    def __init__(self, url, log):
        self.url = url
        self.log = log

    def log_size(self):
        return os.path.getsize(self.log)

    def paths_since(self, offset):
        """The paths of the connections upgraded since the log was `offset` bytes long."""
        with open(self.log, encoding="utf-8", errors="replace") as log:
            log.seek(offset)
            return re.findall(r"path=\"?([^\"\s]+)", log.read())


@pytest.fixture(scope="module")
def mock(tls_files):
    cert, key = tls_files
    with tempfile.TemporaryDirectory() as folder:
        log_path = os.path.join(folder, "mock.log")
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [LIVETALK, "mock", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "--speed", "20"],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "LIVETALK_LOG": "debug", "NO_COLOR": "1"},
            )
        try:
            line = process.stdout.readline()
            match = re.search(r"wss://127\.0\.0\.1:(\d+)", line)
            assert match, f"mock did not print a wss URL: {line!r}"
            yield Mock(f"https://127.0.0.1:{match.group(1)}", log_path)
        finally:
            process.terminate()
            process.wait(timeout=10)


async def lamp_conversation(client):
    config = types.LiveConnectConfig(
        response_modalities=["AUDIO"],
        output_audio_transcription={},
        tools=SMART_HOME_TOOLS,
    )
    calls, audio, transcript, turn_complete = [], bytearray(), [], False
    async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Is the living room lamp on?")]),
            turn_complete=True,
        )
        async for message in session.receive():
            if message.tool_call:
                responses = []
                for call in message.tool_call.function_calls:
                    calls.append(call)
                    responses.append(
                        types.FunctionResponse(
                            id=call.id,
                            name=call.name,
                            response={"device_name": "living room lamp", "status": "off"},
                        )
                    )
                await session.send_tool_response(function_responses=responses)
            if message.data:
                audio.extend(message.data)
            content = message.server_content
            if content and content.output_transcription and content.output_transcription.text:
                transcript.append(content.output_transcription.text)
            if content and content.turn_complete:
                turn_complete = True
    return calls, bytes(audio), "".join(transcript), turn_complete


# None is the SDK's own default (v1 since google-genai 3.4, v1beta before).
@pytest.mark.parametrize("api_version", [None, "v1", "v1beta", "v1alpha"])
def test_official_sdk_tool_call_audio_and_transcription(mock, tls_files, api_version):
    cert, _ = tls_files
    client = client_for(mock.url, cert, api_version)
    offset = mock.log_size()
    calls, audio, transcript, turn_complete = asyncio.run(
        asyncio.wait_for(lamp_conversation(client), timeout=60)
    )
    # The SDK dialled the version asked for, and the mock took it.
    version = re.escape(api_version) if api_version else "v1(beta|alpha)?"
    paths = mock.paths_since(offset)
    assert len(paths) == 1, paths
    assert re.fullmatch(
        rf"/ws/google\.ai\.generativelanguage\.{version}\.GenerativeService\.BidiGenerateContent",
        paths[0],
    ), paths
    assert [c.name for c in calls] == ["get_device_status"]
    assert calls[0].args == {"device_name": "living room lamp"}
    assert calls[0].id.startswith("function-call-")
    # Speech at 24 kHz PCM16: at least half a second of it, and not silence.
    assert len(audio) >= 24_000, len(audio)
    assert any(b != 0 for b in audio[:48_000])
    assert "off" in transcript.lower(), transcript
    assert turn_complete
