"""An app of `livetalk serve` that talks over WebRTC, as the original bridge's Android app
does: signalling on the bridge's WebSocket, the microphone and the model's voice on one
aiortc peer connection (an independent WebRTC implementation). Used by test_webrtc.py and
scripts/bench_webrtc.py."""

import array
import asyncio
import fractions
import json
import math
import re
import time
import wave

import aioice.ice
import av
import websockets
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription

# aioice leaves loopback out of its host candidates; the bridge under test is on loopback.
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []

CONFIG = {
    "model": "models/gemini-3.8-live",
    "generationConfig": {"responseModalities": ["audio"]},
    "inputAudioTranscription": {},
    "outputAudioTranscription": {},
}


def read_wav(path):
    """Mono PCM16 samples and their rate."""
    with wave.open(path, "rb") as wav:
        assert wav.getsampwidth() == 2 and wav.getnchannels() == 1
        samples = array.array("h", wav.readframes(wav.getnframes()))
        return samples, wav.getframerate()


def loud_span(samples, rate, threshold=300):
    """Seconds from the first to the last 10 ms window louder than `threshold` (RMS)."""
    window = rate // 100
    loud = [
        i
        for i in range(0, len(samples) - window + 1, window)
        if math.sqrt(sum(s * s for s in samples[i : i + window]) / window) > threshold
    ]
    if not loud:
        return 0.0
    return (loud[-1] - loud[0] + window) / rate


def pitch(samples, rate):
    """The median pitch of the loud 40 ms windows, by autocorrelation over 60–500 Hz."""
    window = rate // 25
    found = []
    for start in range(0, len(samples) - window, window):
        chunk = samples[start : start + window]
        energy = sum(s * s for s in chunk)
        if math.sqrt(energy / window) < 1000:
            continue
        best, best_lag = 0.0, 0
        for lag in range(rate // 500, rate // 60):
            score = sum(chunk[i] * chunk[i + lag] for i in range(0, window - lag, 2))
            if score > best:
                best, best_lag = score, lag
        if best_lag and best > 0.3 * energy / 2:
            found.append(rate / best_lag)
    found.sort()
    return found[len(found) // 2] if found else 0.0


class Microphone(MediaStreamTrack):
    """The app's microphone: silence, and whatever is queued with `say`, in real time."""

    kind = "audio"

    def __init__(self, rate):
        super().__init__()
        self.rate = rate
        self.frame = rate // 50
        self.pending = array.array("h")
        self.sent = 0
        self.start = None
        self.spoken = asyncio.Event()

    def say(self, samples):
        self.spoken.clear()
        self.pending.extend(samples)

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        due = self.start + self.sent / self.rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        chunk = self.pending[: self.frame]
        del self.pending[: self.frame]
        if not self.pending:
            self.spoken.set()
        chunk.extend([0] * (self.frame - len(chunk)))
        frame = av.AudioFrame(format="s16", layout="mono", samples=self.frame)
        frame.planes[0].update(chunk.tobytes())
        frame.sample_rate = self.rate
        frame.pts = self.sent
        frame.time_base = fractions.Fraction(1, self.rate)
        self.sent += self.frame
        return frame


class Speaker:
    """What the app hears on the bridge's track: 48 kHz samples (left channel) and when
    each 20 ms frame arrived."""

    def __init__(self):
        self.samples = array.array("h")
        self.frames = []  # (arrival time, RMS)
        self.task = None
        self.ended = None

    def listen(self, track):
        self.task = asyncio.ensure_future(self._run(track))

    async def _run(self, track):
        while True:
            try:
                frame = await track.recv()
            except Exception as e:  # the track ended
                self.ended = repr(e)
                return
            # aiortc decodes to packed s16, stereo at 48 kHz; the plane may be padded.
            assert frame.format.name == "s16", frame.format.name
            channels = len(frame.layout.channels)
            pcm = array.array("h", bytes(frame.planes[0]))[: frame.samples * channels]
            mono = pcm[::channels]
            self.samples.extend(mono)
            rms = math.sqrt(sum(s * s for s in mono) / max(1, len(mono)))
            self.frames.append((time.monotonic(), rms))

    def loud_frames(self, threshold=300):
        return [(at, rms) for at, rms in self.frames if rms > threshold]


class WebRtcApp:
    """One app connection: its WebSocket to the bridge, its peer connection, and what it
    was sent, stamped with when it arrived."""

    def __init__(self, url, rate):
        self.url = url
        self.mic = Microphone(rate)
        self.speaker = Speaker()
        self.messages = []  # (arrival time, message)
        self.arrived = asyncio.Condition()
        self.ws = None
        self.pc = None
        self.reader = None

    async def open(self):
        self.ws = await websockets.connect(self.url, max_size=None)
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self):
        async for text in self.ws:
            message = json.loads(text)
            async with self.arrived:
                self.messages.append((time.monotonic(), message))
                self.arrived.notify_all()

    async def send(self, kind, payload=None):
        await self.ws.send(json.dumps({"type": kind, "payload": payload or {}}))

    async def wait_for(self, kind, after=0, timeout=20, where=lambda m: True):
        """The first message of `kind` past index `after` that `where` accepts: its index,
        arrival time and the message."""

        def found():
            for index in range(after, len(self.messages)):
                at, message = self.messages[index]
                if message["type"] == kind and where(message):
                    return index, at, message
            return None

        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(found), timeout)
            return found()

    def of(self, kind):
        return [m for _, m in self.messages if m["type"] == kind]

    async def connect_gemini(self, wait=True):
        await self.send("CONNECT_GEMINI", {"initialConfig": CONFIG})
        if wait:
            _, _, setup = await self.wait_for("SETUP_COMPLETE")
            assert setup["payload"]["success"], setup

    async def offer(self, trickle=False):
        """Makes the offer (an audio track and a data channel, as the Android app does) and
        sends it; with `trickle`, its candidates go separately in the app's nested shape."""
        self.pc = RTCPeerConnection()
        self.pc.addTrack(self.mic)
        self.channel = self.pc.createDataChannel("chat")

        @self.pc.on("track")
        def on_track(track):
            if track.kind == "audio":
                self.speaker.listen(track)

        @self.channel.on("open")
        def on_open():
            self.channel.send("hello from the app")

        offer = await self.pc.createOffer()
        await self.pc.setLocalDescription(offer)
        sdp = self.pc.localDescription.sdp
        if not trickle:
            await self.send("WEBRTC_OFFER", {"type": "offer", "sdp": sdp})
            return
        lines = sdp.split("\r\n")
        candidates = [line[2:] for line in lines if line.startswith("a=candidate:")]
        assert candidates, sdp
        bare = "\r\n".join(line for line in lines if not line.startswith("a=candidate:"))
        bare = bare.replace("a=end-of-candidates\r\n", "")
        await self.send("WEBRTC_OFFER", {"type": "offer", "sdp": bare})
        for candidate in candidates:
            await self.send(
                "WEBRTC_ICE_CANDIDATE",
                {"candidate": {"candidate": candidate, "sdpMid": "0", "sdpMLineIndex": 0}},
            )

    async def answered(self, timeout=20):
        _, _, answer = await self.wait_for("WEBRTC_ANSWER", timeout=timeout)
        await self.pc.setRemoteDescription(
            RTCSessionDescription(sdp=answer["payload"]["sdp"], type="answer")
        )
        deadline = time.monotonic() + timeout
        while self.pc.connectionState != "connected":
            assert self.pc.connectionState not in ("failed", "closed"), self.pc.connectionState
            assert time.monotonic() < deadline, "the peer connection did not connect"
            await asyncio.sleep(0.02)

    def heard_seconds(self):
        """What the demo model's input transcription says it heard, in seconds."""
        text = "".join(
            m["payload"]["serverContent"]["inputTranscription"].get("text", "")
            for m in self.of("CONTENT_MESSAGE")
            if "inputTranscription" in m["payload"]["serverContent"]
        )
        match = re.search(r"about ([\d.]+) seconds", text)
        return float(match.group(1)) if match else None

    async def close(self):
        if self.pc:
            await self.pc.close()
        if self.speaker.task:
            self.speaker.task.cancel()
        if self.ws:
            await self.ws.close()
        if self.reader:
            self.reader.cancel()


async def spoken_turn(url, phrase, trickle=False, offer_early=False, timeout=30, whole_reply=True):
    """One app's spoken turn over WebRTC; returns the app (closed) and the phrase's length in
    seconds. With `whole_reply`, it waits for the whole reply to play on the track (it plays
    in real time); else for the turn to be complete and a second of the reply heard."""
    samples, rate = read_wav(phrase)
    app = WebRtcApp(url, rate)
    await app.open()
    try:
        if offer_early:
            # Before the session is up: the bridge holds it until SETUP_COMPLETE.
            await app.send("CONNECT_GEMINI", {"initialConfig": CONFIG})
            await app.offer(trickle=trickle)
            _, _, setup = await app.wait_for("SETUP_COMPLETE")
            assert setup["payload"]["success"], setup
        else:
            await app.connect_gemini()
            await app.offer(trickle=trickle)
        await app.answered()
        # A moment of the line's silence, then the phrase.
        await asyncio.sleep(0.3)
        app.mic.say(samples)
        await app.wait_for("TURN_COMPLETE", timeout=timeout)
        if whole_reply:
            await app.wait_for(
                "ASSISTANT_SPEAKING", timeout=timeout, where=lambda m: not m["payload"]["speaking"]
            )
            # The track's last frames after the last one that was loud.
            await asyncio.sleep(0.2)
        else:
            deadline = time.monotonic() + timeout
            while len(app.speaker.loud_frames()) < 50:
                assert time.monotonic() < deadline, "no reply heard on the track"
                await asyncio.sleep(0.05)
    finally:
        await app.close()
    return app, loud_span(samples, rate)
