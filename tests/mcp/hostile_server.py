"""A hostile MCP server over stdio, in plain JSON-RPC (no SDK: an SDK would not misbehave).

Usage: hostile_server.py MODE [http]. Over stdio by default; with `http`, a streamable-HTTP
server (plain JSON answers, no events) on a free loopback port it prints as "listening on
PORT" (the listing modes only). Every mode offers `echo` (one string argument, `message`),
which answers "Echo: <message>", so a test can see the session go on; besides it:

  fanout         a tool whose schema `$ref`s fan out: five properties per level, twelve levels
  huge           a tool whose schema is 5 MB
  heavy          a tool whose schema has 60,000 properties (600 KB)
  many           100,000 tools, in pages of 1,000
  bigpage        100,000 tools in one page (5 MB)
  pages          every page of every listing carries a `nextCursor`
  relist         the first listing is plain; then `tools/list_changed`, and every later
                 listing's pages carry a `nextCursor`
  storm          2,000 `tools/list_changed` at once, and a different list at each listing
  progress       `echo` sends progress (and log) notifications flat out for 6 s first
  stderr         stderr without a newline (hundreds of MB in 4 s), with bytes that are not
                 UTF-8, then short lines flat out for 2 s; `echo` answers once that is over,
                 and it dies of SIGPIPE if its stderr is closed before
"""

import json
import signal
import sys
import threading
import time

MODE = sys.argv[1]
OUT = sys.stdout.buffer
LOCK = threading.Lock()
# A real server dies of SIGPIPE when its stderr is closed under it; Python would only raise.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def send(message):
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    with LOCK:
        OUT.write(data)
        OUT.flush()


def echo_tool():
    return {
        "name": "echo",
        "description": "Echoes the message.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    }


def fan_out_schema(fan, levels):
    defs = {}
    for level in range(levels):
        if level + 1 < levels:
            prop = {"$ref": "#/$defs/L%d" % (level + 1)}
        else:
            prop = {"type": "string"}
        defs["L%d" % level] = {
            "type": "object",
            "properties": {"p%d" % i: prop for i in range(fan)},
        }
    return {"type": "object", "$defs": defs, "properties": {"root": {"$ref": "#/$defs/L0"}}}


def huge_schema():
    properties = {}
    i = 0
    size = 0
    while size < 5_000_000:
        prop = {"type": "string", "description": "a property of a huge schema %d" % i}
        properties["p%d" % i] = prop
        size += 60
        i += 1
    return {"type": "object", "properties": properties}


LISTINGS = 0


def tools_page(cursor):
    global LISTINGS
    if cursor is None:
        LISTINGS += 1
    if MODE == "fanout":
        deep = {"name": "deep", "description": "Fans out.", "inputSchema": fan_out_schema(5, 12)}
        return {"tools": [echo_tool(), deep]}
    if MODE == "huge":
        return {"tools": [echo_tool(), {"name": "huge", "inputSchema": huge_schema()}]}
    if MODE == "heavy":
        properties = {"p%d" % i: True for i in range(60_000)}
        heavy = {"name": "heavy", "inputSchema": {"type": "object", "properties": properties}}
        return {"tools": [echo_tool(), heavy]}
    if MODE == "many":
        page = 0 if cursor is None else int(cursor)
        tools = [echo_tool()] if page == 0 else []
        for i in range(page * 1000, (page + 1) * 1000):
            tools.append({"name": "t%d" % i, "inputSchema": {"type": "object"}})
        return {"tools": tools, "nextCursor": str(page + 1)} if page < 99 else {"tools": tools}
    if MODE == "bigpage":
        tools = [echo_tool()]
        for i in range(100_000):
            tools.append({"name": "t%d" % i, "inputSchema": {"type": "object"}})
        return {"tools": tools}
    if MODE == "pages" or (MODE == "relist" and LISTINGS > 1):
        page = 0 if cursor is None else int(cursor)
        tools = [echo_tool()] if page == 0 else []
        tools.append({"name": "page%d" % page, "inputSchema": {"type": "object"}})
        return {"tools": tools, "nextCursor": str(page + 1)}
    if MODE == "storm":
        return {"tools": [echo_tool(), {"name": "gen%d" % LISTINGS, "inputSchema": {"type": "object"}}]}
    return {"tools": [echo_tool()]}


def after_initialized():
    if MODE == "relist":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    if MODE == "storm":
        for _ in range(2000):
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    if MODE == "stderr":
        FLOOD.start()


def flood_stderr():
    """Runs on FLOOD; `echo` answers once it is over, so an answer shows the server lived."""
    chunk = b"\xff\xfe not UTF-8 " + b"no newline here " * 4096
    err = sys.stderr.buffer
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        err.write(chunk)
        err.flush()
    err.write(b"\nthe flood is over\n")
    # Then short lines, flat out.
    deadline = time.monotonic() + 2
    n = 0
    while time.monotonic() < deadline:
        n += 1
        err.write(b"short line %d\n" % n)
    err.write(b"the last line\n")
    err.flush()


FLOOD = threading.Thread(target=flood_stderr, daemon=True)


def call(request):
    params = request.get("params") or {}
    message = (params.get("arguments") or {}).get("message", "")
    token = (params.get("_meta") or {}).get("progressToken")
    if MODE == "progress":
        deadline = time.monotonic() + 6
        n = 0
        while time.monotonic() < deadline:
            n += 1
            if token is not None:
                send({
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": n, "message": "step %d" % n},
                })
            send({
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "log line %d" % n},
            })
    if MODE == "stderr":
        FLOOD.join()
    return {"content": [{"type": "text", "text": "Echo: " + message}]}


def answer(request):
    """The answer to one request, or None for a notification."""
    method = request.get("method")
    if "id" not in request:
        if method == "notifications/initialized":
            after_initialized()
        return None
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        result = tools_page((request.get("params") or {}).get("cursor"))
    elif method == "tools/call":
        result = call(request)
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main():
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        response = answer(request)
        if response is not None:
            send(response)


def serve_http():
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            response = answer(json.loads(body))
            if response is None:
                self.send_response(202)
                self.end_headers()
                return
            data = json.dumps(response).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.send_response(405)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if sys.argv[2:] == ["http"]:
    serve_http()
else:
    main()
