"""What the Python tests' apps built on the official google-genai SDK share: the smart-home
tools they declare, and a client that dials a livetalk server over wss:// trusting its
self-signed certificate through the SDK's documented `async_client_args={"ssl": ctx}`."""

import ssl

from google import genai
from google.genai import types

SMART_HOME_TOOLS = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_device_status",
                description="Gets the current status of a specified smart home device.",
                parameters=types.Schema(
                    type=types.Type.OBJECT,
                    properties={
                        "device_name": types.Schema(
                            type=types.Type.STRING,
                            description="The name of the device, e.g., 'living room lamp'.",
                        )
                    },
                    required=["device_name"],
                ),
            ),
            types.FunctionDeclaration(
                name="set_device_status",
                description="Sets the status or a setting of a smart home device.",
                parameters=types.Schema(
                    type=types.Type.OBJECT,
                    properties={
                        "device_name": types.Schema(type=types.Type.STRING),
                        "new_status": types.Schema(type=types.Type.STRING),
                    },
                    required=["device_name", "new_status"],
                ),
            ),
        ]
    )
]


def client_for(base_url, cert, api_version=None):
    context = ssl.create_default_context(cafile=cert)
    options = {"base_url": base_url, "async_client_args": {"ssl": context}}
    if api_version:
        options["api_version"] = api_version
    return genai.Client(api_key="test-key-not-real", http_options=options)
