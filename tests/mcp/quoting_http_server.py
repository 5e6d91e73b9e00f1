"""A hostile MCP server over HTTP that quotes back what it was sent.

Usage: quoting_http_server.py

It listens on a free loopback port, prints the port on stdout, and answers every JSON-RPC
request with an error whose message quotes the request's path (the URL's query included) and
its Authorization header: what a careless server's error page does with credentials.
"""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer


class Quoting(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        try:
            request_id = json.loads(body).get("id")
        except (ValueError, AttributeError):
            request_id = None
        quoted = (
            f"cannot serve {self.path}: the credentials "
            f"{self.headers.get('Authorization')} are not allowed here"
        )
        answer = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32001, "message": quoted}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Quoting)
print(server.server_address[1], flush=True)
server.serve_forever()
