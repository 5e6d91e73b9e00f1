"""The official Python SDK's own receive-and-respond loop, as its documentation shows it: one
Live session through `google-genai`, each `tool_call` answered with `send_tool_response` from
inside `async for message in session.receive()`. benches/tool_roundtrip.rs (`--sdk PYTHON`)
times it beside livetalk against the same server.

    python sdk_tool_loop.py https://127.0.0.1:PORT   (SSL_CERT_FILE names the server's CA)
"""

import asyncio
import sys

from google import genai
from google.genai import types


async def main():
    client = genai.Client(api_key="bench-key",
                          http_options=types.HttpOptions(base_url=sys.argv[1]))
    config = types.LiveConnectConfig(
        response_modalities=["TEXT"],
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="get_current_time", description="The time now.")])],
    )
    async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
        while True:
            async for message in session.receive():
                if message.tool_call:
                    await session.send_tool_response(function_responses=[
                        types.FunctionResponse(id=call.id, name=call.name,
                                               response={"output": "now"})
                        for call in message.tool_call.function_calls
                    ])


if __name__ == "__main__":
    asyncio.run(main())
