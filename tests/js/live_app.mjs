// An app on the official JS SDK (@google/genai) talking to a Live server: the proxy tests run
// it once straight at a server and once through `livetalk proxy`, and compare what it printed.
//
// node live_app.mjs BASE_URL CONVERSATION [PCM_FILE]
//   BASE_URL      https://127.0.0.1:PORT (the SDK dials wss; NODE_EXTRA_CA_CERTS trusts the cert)
//   CONVERSATION  text | spoken | tool | goaway | refused
//   PCM_FILE      16 kHz mono PCM16 the spoken conversation sends, paced in real time
// Prints one JSON line: what the app got (transcripts, audio digest, tool calls, turns).
// The key comes from LIVE_APP_KEY; the app never prints it.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { GoogleGenAI, Modality } from '@google/genai';

const [baseUrl, conversation, pcmFile] = process.argv.slice(2);
const MODEL = 'gemini-3.8-live';
const DEADLINE_MS = 30_000;

const TOOLS = [
  {
    functionDeclarations: [
      {
        name: 'get_device_status',
        description: 'Gets the current status of a specified smart home device.',
        parameters: {
          type: 'OBJECT',
          properties: { device_name: { type: 'STRING' } },
          required: ['device_name'],
        },
      },
      {
        name: 'set_device_status',
        description: 'Sets the status or a setting of a smart home device.',
        parameters: {
          type: 'OBJECT',
          properties: { device_name: { type: 'STRING' }, new_status: { type: 'STRING' } },
          required: ['device_name', 'new_status'],
        },
      },
    ],
  },
];

// What the app's tools answer: the same in the Python app (tests/python/sdk_apps.py).
function answer(call) {
  if (call.name === 'get_device_status') {
    return { device_name: call.args.device_name, status: 'off' };
  }
  return { device_name: call.args.device_name, status: call.args.new_status, ok: true };
}

const ai = new GoogleGenAI({
  apiKey: process.env.LIVE_APP_KEY,
  httpOptions: { baseUrl, apiVersion: 'v1beta' },
});

/** What the app heard and did, over every connection of the conversation. */
const result = {
  transcript: '',
  inputTranscript: '',
  audio: createHash('sha256'),
  audioBytes: 0,
  calls: [],
  turns: 0,
  goAway: false,
  refused: null,
  closes: [],
};

/** One connection: its messages arrive in `inbox`; `next()` waits for the next one. */
async function open(config) {
  const inbox = [];
  let wake = null;
  const push = (item) => {
    inbox.push(item);
    if (wake) {
      wake();
      wake = null;
    }
  };
  const session = await ai.live.connect({
    model: MODEL,
    config,
    callbacks: {
      onmessage: (message) => push({ message }),
      onerror: (error) => push({ error: String(error && error.message) }),
      onclose: (event) => push({ close: { code: event.code, reason: String(event.reason) } }),
    },
  });
  const next = async () => {
    const started = Date.now();
    while (inbox.length === 0) {
      const left = DEADLINE_MS - (Date.now() - started);
      if (left <= 0) throw new Error(`no message within ${DEADLINE_MS} ms`);
      await new Promise((resolve) => {
        wake = resolve;
        setTimeout(resolve, left);
      });
    }
    return inbox.shift();
  };
  return { session, next };
}

/** Reads one model turn to its turnComplete, answering tool calls; returns the last handle. */
async function turn(connection) {
  let handle = null;
  for (;;) {
    const item = await connection.next();
    if (item.close) throw new Error(`closed mid-turn: ${item.close.code} ${item.close.reason}`);
    if (item.error) throw new Error(item.error);
    const message = item.message;
    if (message.sessionResumptionUpdate && message.sessionResumptionUpdate.newHandle) {
      handle = message.sessionResumptionUpdate.newHandle;
    }
    if (message.toolCall) {
      const functionResponses = message.toolCall.functionCalls.map((call) => {
        result.calls.push([call.name, call.args]);
        return { id: call.id, name: call.name, response: answer(call) };
      });
      connection.session.sendToolResponse({ functionResponses });
    }
    const content = message.serverContent;
    if (!content) continue;
    for (const part of (content.modelTurn && content.modelTurn.parts) || []) {
      if (part.inlineData && part.inlineData.data) {
        const bytes = Buffer.from(part.inlineData.data, 'base64');
        result.audio.update(bytes);
        result.audioBytes += bytes.length;
      }
    }
    if (content.outputTranscription && content.outputTranscription.text) {
      result.transcript += content.outputTranscription.text;
    }
    if (content.inputTranscription && content.inputTranscription.text) {
      result.inputTranscript += content.inputTranscription.text;
    }
    if (content.turnComplete) {
      result.turns += 1;
      return handle;
    }
  }
}

/** After a turn, reads on to the goAway (and the resumption update if it comes later). */
async function untilGoAway(connection, handle) {
  for (;;) {
    const item = await connection.next();
    if (item.close || item.error) throw new Error('closed before the goAway');
    const message = item.message;
    if (message.sessionResumptionUpdate && message.sessionResumptionUpdate.newHandle) {
      handle = message.sessionResumptionUpdate.newHandle;
    }
    if (message.goAway) {
      result.goAway = true;
      return handle;
    }
  }
}

async function closeAndWait(connection) {
  connection.session.close();
  for (;;) {
    const item = await connection.next();
    if (item.close) {
      result.closes.push(item.close.code);
      return;
    }
  }
}

function say(connection, text) {
  connection.session.sendClientContent({
    turns: [{ role: 'user', parts: [{ text }] }],
    turnComplete: true,
  });
}

const audioConfig = {
  responseModalities: [Modality.AUDIO],
  outputAudioTranscription: {},
};

async function main() {
  if (conversation === 'text') {
    const connection = await open(audioConfig);
    say(connection, 'Hello, who are you?');
    await turn(connection);
    await closeAndWait(connection);
  } else if (conversation === 'tool') {
    const connection = await open({ ...audioConfig, tools: TOOLS });
    say(connection, 'Is the living room lamp on?');
    await turn(connection);
    await closeAndWait(connection);
  } else if (conversation === 'spoken') {
    const connection = await open({ ...audioConfig, inputAudioTranscription: {} });
    const pcm = readFileSync(pcmFile);
    const chunk = 3200; // 100 ms at 16 kHz
    const started = Date.now();
    for (let offset = 0, n = 0; offset < pcm.length; offset += chunk, n += 1) {
      // Real time, as a microphone sends it.
      const due = started + n * 100;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      connection.session.sendRealtimeInput({
        audio: { data: pcm.subarray(offset, offset + chunk).toString('base64'), mimeType: 'audio/pcm;rate=16000' },
      });
    }
    await turn(connection);
    await closeAndWait(connection);
  } else if (conversation === 'goaway') {
    const first = await open({ ...audioConfig, tools: TOOLS, sessionResumption: {} });
    say(first, 'Is the living room lamp on?');
    let handle = await turn(first);
    handle = await untilGoAway(first, handle);
    if (!handle) throw new Error('no resumption handle before the goAway');
    // A well-behaved app: the new connection first, then the old one closed.
    const second = await open({ ...audioConfig, tools: TOOLS, sessionResumption: { handle } });
    await closeAndWait(first);
    say(second, 'Turn it on.');
    await turn(second);
    await closeAndWait(second);
  } else if (conversation === 'refused') {
    // A TEXT reply asked of a native-audio model: the server refuses the setup with 1007.
    const model = 'gemini-2.5-flash-native-audio-preview-09-2025';
    const connecting = ai.live.connect({
      model,
      config: { responseModalities: [Modality.TEXT] },
      callbacks: { onmessage: () => {} },
    });
    result.refused = await connecting.then(
      () => null,
      (error) => String(error.message),
    );
    if (result.refused === null) throw new Error('the setup was not refused');
  } else {
    throw new Error(`unknown conversation ${conversation}`);
  }
  const { audio, ...rest } = result;
  process.stdout.write(JSON.stringify({ ...rest, audio: audio.digest('hex') }) + '\n');
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`live_app: ${error.stack || error}\n`);
    process.exit(1);
  },
);
