"""An app built on the official google-genai Python SDK gets its own session back from
`livetalk mock --replay`, with nothing else running: the session is recorded through
`livetalk proxy` (in front of the offline demo model), both are stopped, and the same app
pointed at the replay gets the same tool calls (names, arguments, ids), text and transcripts,
turn by turn, and each turnComplete. `--strict` is on, so the app sending anything the
recording does not hold would end its session."""

import asyncio
import json
import os
import re
import subprocess

import pytest
from google.genai import types

from sdk_app import SMART_HOME_TOOLS, client_for

LIVETALK = os.environ.get("LIVETALK_BIN", "target/debug/livetalk")

QUESTIONS = ["Is the living room lamp on?", "Turn it on, please."]


def start(args, pattern):
    """`livetalk ARGS`, once a line of its stdout matches `pattern`: the process and the match."""
    process = subprocess.Popen(
        [LIVETALK, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    for line in process.stdout:
        match = re.search(pattern, line)
        if match:
            return process, match
    process.kill()
    raise AssertionError(f"livetalk {' '.join(args)} ended without printing {pattern!r}")


def stop(process):
    process.terminate()
    process.wait(timeout=10)


async def smart_home_app(client, modality):
    """The app: each question as a typed turn, each tool call answered from its own smart
    home; what it was told, turn by turn."""
    config = types.LiveConnectConfig(
        response_modalities=[modality],
        output_audio_transcription={} if modality == "AUDIO" else None,
        tools=SMART_HOME_TOOLS,
    )
    lamp = {"device_name": "living room lamp", "status": "off"}
    turns = []
    async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
        for question in QUESTIONS:
            turn = {"calls": [], "text": "", "transcript": "", "turn_completes": 0}
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text=question)]),
                turn_complete=True,
            )
            while turn["turn_completes"] == 0:
                async for message in session.receive():
                    if message.tool_call:
                        answers = []
                        for call in message.tool_call.function_calls:
                            turn["calls"].append((call.id, call.name, call.args))
                            if call.name == "set_device_status":
                                lamp["status"] = call.args.get("new_status", lamp["status"])
                            answers.append(
                                types.FunctionResponse(id=call.id, name=call.name, response=dict(lamp))
                            )
                        await session.send_tool_response(function_responses=answers)
                    content = message.server_content
                    if content and content.model_turn:
                        turn["text"] += "".join(p.text or "" for p in content.model_turn.parts or [])
                    if content and content.output_transcription and content.output_transcription.text:
                        turn["transcript"] += content.output_transcription.text
                    if content and content.turn_complete:
                        turn["turn_completes"] += 1
            turns.append(turn)
    return turns


def run_app(base_url, cert, modality):
    return asyncio.run(
        asyncio.wait_for(smart_home_app(client_for(base_url, cert), modality), timeout=60)
    )


@pytest.mark.parametrize("modality", ["AUDIO", "TEXT"])
def test_the_sdk_app_gets_its_recorded_session_back(tls_files, tmp_path, modality):
    cert, key = tls_files
    recordings = tmp_path / "recordings"
    proxy, match = start(
        ["proxy", "--offline", "--headless", "--json", "--listen", "127.0.0.1:0",
         "--tls-cert", cert, "--tls-key", key, "--record", str(recordings)],
        r"^\{.*\"event\":\"listening\"",
    )
    try:
        listening = json.loads(match.string)
        port = listening["wss"].rsplit(":", 1)[1]
        recorded = run_app(f"https://127.0.0.1:{port}", cert, modality)
    finally:
        stop(proxy)
    # The app's session is what the proxy saw: a tool call in each turn, words, a turnComplete.
    assert [[name for _, name, _ in turn["calls"]] for turn in recorded] == [
        ["get_device_status"],
        ["set_device_status"],
    ], recorded
    words = "transcript" if modality == "AUDIO" else "text"
    assert all(turn[words] and turn["turn_completes"] == 1 for turn in recorded), recorded
    assert "off" in recorded[0][words], recorded
    (folder,) = [path for path in recordings.iterdir() if (path / "session.jsonl").exists()]

    # Nothing else runs now: the replay alone serves the app its session.
    mock, match = start(
        ["mock", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
         "--replay", str(folder), "--strict", "--speed", "20"],
        r"wss://127\.0\.0\.1:(\d+)",
    )
    try:
        replayed = run_app(f"https://127.0.0.1:{match.group(1)}", cert, modality)
        # Again, from the start, for a second app.
        again = run_app(f"https://127.0.0.1:{match.group(1)}", cert, modality)
    finally:
        stop(mock)
    assert replayed == recorded
    assert again == recorded
