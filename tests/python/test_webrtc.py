"""`livetalk serve --offline` with an independent WebRTC implementation (aiortc) as the app:
the offer over the bridge's WebSocket, a spoken phrase on the app's audio track, and the
demo model's reply heard on the bridge's track."""

import array
import asyncio
import base64

from webrtc_app import WebRtcApp, loud_span, pitch, read_wav, spoken_turn

PHRASE = "Is the living room lamp on? Please tell me."


def reply_audio(app):
    """The model's reply as the WebSocket carried it: 24 kHz samples, and the span of
    arrival times of its chunks."""
    pcm = array.array("h")
    times = []
    for at, message in app.messages:
        if message["type"] == "AUDIO_CHUNK":
            pcm.extend(array.array("h", base64.b64decode(message["payload"]["data"])))
            times.append(at)
    return pcm, (times[-1] - times[0]) if times else 0.0


def check_heard_phrase(app, phrase_seconds):
    heard = app.heard_seconds()
    assert heard is not None, app.of("CONTENT_MESSAGE")
    assert abs(heard - phrase_seconds) <= 0.5, (heard, phrase_seconds)


def test_a_spoken_turn_over_webrtc(bridge, spoken):
    app, phrase_seconds = asyncio.run(spoken_turn(bridge.url, spoken(PHRASE)))
    # The bridge decoded the app's track and the model heard the phrase's length of speech.
    check_heard_phrase(app, phrase_seconds)
    # The app heard the whole reply on its track: as long as the audio the model sent...
    sent, sent_over = reply_audio(app)
    expected = loud_span(sent, 24000)
    heard = app.speaker.samples
    heard_span = loud_span(heard, 48000)
    assert expected > 1.0, expected
    assert abs(heard_span - expected) <= 0.15, (heard_span, expected)
    # ...at a speech pitch...
    found = pitch(heard[: 48000 * 3 : 6], 8000)
    assert 70 <= found <= 400, found
    # ...paced in real time by the bridge, though the model sent it four times faster.
    frames = app.speaker.loud_frames()
    played_over = frames[-1][0] - frames[0][0]
    assert abs(played_over - heard_span) <= 0.3, (played_over, heard_span)
    assert sent_over < 0.6 * played_over, (sent_over, played_over)
    # ASSISTANT_SPEAKING once when the first audio went out on the track, false at its end.
    speaking = [(at, m["payload"]["speaking"]) for at, m in app.messages if m["type"] == "ASSISTANT_SPEAKING"]
    assert [s for _, s in speaking] == [True, False], speaking
    assert speaking[0][0] <= frames[0][0] + 0.05, (speaking[0][0], frames[0][0])
    assert speaking[1][0] >= frames[-1][0] - 0.1, (speaking[1][0], frames[-1][0])
    # The WebSocket carried what it always does; no errors.
    assert not app.of("GEMINI_ERROR"), app.of("GEMINI_ERROR")


def test_candidates_trickled_in_the_apps_nested_shape(bridge, spoken):
    app, phrase_seconds = asyncio.run(spoken_turn(bridge.url, spoken(PHRASE), trickle=True, whole_reply=False))
    check_heard_phrase(app, phrase_seconds)
    assert loud_span(app.speaker.samples, 48000) >= 0.9
    assert not app.of("GEMINI_ERROR"), app.of("GEMINI_ERROR")


def test_an_offer_before_setup_complete_is_held_until_the_session_is_up(bridge, spoken):
    app, phrase_seconds = asyncio.run(spoken_turn(bridge.url, spoken(PHRASE), offer_early=True, whole_reply=False))
    kinds = [m["type"] for _, m in app.messages]
    assert kinds.index("SETUP_COMPLETE") < kinds.index("WEBRTC_ANSWER"), kinds
    check_heard_phrase(app, phrase_seconds)
    assert loud_span(app.speaker.samples, 48000) >= 0.9
    assert not app.of("GEMINI_ERROR"), app.of("GEMINI_ERROR")


def test_speaking_over_the_reply_stops_it_at_the_app_at_once(realtime_bridge, spoken):
    async def run():
        samples, rate = read_wav(spoken(PHRASE))
        app = WebRtcApp(realtime_bridge.url, rate)
        await app.open()
        try:
            await app.connect_gemini()
            await app.offer()
            await app.answered()
            app.mic.say(samples)
            index, _, _ = await app.wait_for(
                "ASSISTANT_SPEAKING", where=lambda m: m["payload"]["speaking"]
            )
            # Half a second of the reply, then the user talks over it.
            while len(app.speaker.loud_frames()) < 25:
                await asyncio.sleep(0.02)
            app.mic.say(samples)
            _, interrupted_at, _ = await app.wait_for("INTERRUPTED", after=index)
            await app.wait_for(
                "ASSISTANT_SPEAKING", after=index, where=lambda m: not m["payload"]["speaking"]
            )
            await asyncio.sleep(0.5)
            return app, interrupted_at
        finally:
            await app.close()

    app, interrupted_at = asyncio.run(run())
    loud = [at - interrupted_at for at, _ in app.speaker.loud_frames()]
    # The reply was playing when the user talked over it...
    assert any(-0.3 <= t <= 0 for t in loud), loud[-10:]
    # ...and stopped at the app within 100 ms of INTERRUPTED.
    late = [t for t in loud if t > 0]
    print(f"\nlast loud frame {max(late, default=0) * 1000:.0f} ms after INTERRUPTED")
    assert not late or max(late) <= 0.1, late
    assert not app.of("GEMINI_ERROR"), app.of("GEMINI_ERROR")


def test_five_concurrent_webrtc_sessions_each_complete_a_spoken_turn(bridge, spoken):
    async def run():
        phrase = spoken(PHRASE)
        return await asyncio.gather(*(spoken_turn(bridge.url, phrase, whole_reply=False) for _ in range(5)))

    for app, phrase_seconds in asyncio.run(run()):
        check_heard_phrase(app, phrase_seconds)
        assert loud_span(app.speaker.samples, 48000) >= 0.9
        assert not app.of("GEMINI_ERROR"), app.of("GEMINI_ERROR")
