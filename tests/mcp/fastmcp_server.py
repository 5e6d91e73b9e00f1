"""A small MCP server (the Python SDK's FastMCP) that livetalk's tests run against.

Usage: fastmcp_server.py RECORD_FILE (stdio | http PORT)

It writes what happened to it into RECORD_FILE, one JSON object a line, for the test to read:
every `notifications/cancelled` it receives (`{"event": "cancel_notification", ...}`), each
start and end of its long-running tool (`started`, `finished` or `cancelled`), and the start
of the server (`ready`). Its tools:
  - count_slowly(steps, step_secs): reports progress each step; the long-running operation
  - fail(why): a result with isError true
  - add_tool(): adds a tool `late_tool` and tells the client its tool list changed
  - crash(): writes a last line to stderr and exits at once
  - whoami(): no parameters, annotated read-only; says the server's name
  - delete_all_files(): annotated both read-only and destructive; records `ran` if called
  - huge_answer(): annotated read-only; answers with 3 MiB of text
"""

import asyncio
import json
import os
import sys

from mcp import types
from mcp.server.fastmcp import Context, FastMCP

RECORD = sys.argv[1]
MODE = sys.argv[2]


def record(**event):
    with open(RECORD, "a", encoding="utf-8") as f:
        f.write(json.dumps(event) + "\n")
        f.flush()


# Every notification a client sends is validated as a ClientNotification first: record the
# cancellations there, whatever becomes of them afterwards.
_validate = types.ClientNotification.model_validate


def _recording_validate(obj, *args, **kwargs):
    notification = _validate(obj, *args, **kwargs)
    if isinstance(notification.root, types.CancelledNotification):
        params = notification.root.params
        record(
            event="cancel_notification",
            request_id=params.requestId,
            reason=params.reason,
        )
    return notification


types.ClientNotification.model_validate = _recording_validate

port = int(sys.argv[3]) if MODE == "http" else 0
server = FastMCP("livetalk-test", host="127.0.0.1", port=port)


@server.tool()
async def count_slowly(steps: int, step_secs: float, ctx: Context) -> str:
    """Counts to `steps`, one step every `step_secs` seconds, reporting progress."""
    record(event="started", tool="count_slowly", steps=steps)
    finished = False
    try:
        for step in range(1, steps + 1):
            await asyncio.sleep(step_secs)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        finished = True
        return f"counted to {steps}"
    finally:
        record(event="finished" if finished else "cancelled", tool="count_slowly")


@server.tool()
def fail(why: str) -> types.CallToolResult:
    """Always fails, saying why."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"it failed: {why}")],
        isError=True,
    )


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Adds the tool late_tool and tells the client."""

    def late_tool(word: str) -> str:
        """A tool that came later."""
        return f"late: {word}"

    server.add_tool(late_tool)
    await ctx.session.send_tool_list_changed()
    return "added late_tool"


@server.tool()
def crash() -> str:
    """Stops the server at once."""
    print("fastmcp test server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
def whoami() -> str:
    """Says who this is."""
    return "the livetalk test server"


@server.tool(
    annotations=types.ToolAnnotations(readOnlyHint=True, destructiveHint=True)
)
def delete_all_files() -> str:
    """Deletes every file (it only says so, and records that it ran)."""
    record(event="ran", tool="delete_all_files")
    return "every file deleted"


@server.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
def huge_answer() -> str:
    """Answers with more text than a client should read in one message."""
    return "x" * (3 << 20)


record(event="ready", pid=os.getpid(), mode=MODE)
if MODE == "http":
    server.run(transport="streamable-http")
else:
    server.run(transport="stdio")
