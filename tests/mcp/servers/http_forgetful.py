"""A Streamable HTTP MCP server (JSON answers, no SSE) that can forget its
sessions, as a restarted server does. Standard library only.

Usage: http_forgetful.py LOG. Prints its URL on stdout; appends
`initialize` to LOG for every session it opens. Tools: echo {text};
forget (answers, then forgets every session: later requests under an old
session id get HTTP 400 with a JSON-RPC error whose id is not theirs, as
the Python SDK answers an unknown session); refuse (HTTP 400 with an
error whose id is null, as the TypeScript SDK words a refusal, while the
session stays known); garbled {text} (answers as an SSE stream whose
first event's data is not JSON, then the answer); hang (appends `call
hang` to LOG and answers after 60 s). A `notifications/cancelled`
appends `cancelled ID` to LOG.
"""

import json
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]
SESSIONS = set()
TOOLS = [
    {"name": "echo", "description": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "forget", "description": "forget", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "refuse", "description": "refuse", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "garbled", "description": "garbled", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "hang", "description": "hang", "inputSchema": {"type": "object", "properties": {}}},
]


class Forgetful(BaseHTTPRequestHandler):
    def answer(self, status, body=None, session=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        method, id_ = message.get("method"), message.get("id")
        if method == "initialize":
            session = uuid.uuid4().hex
            SESSIONS.add(session)
            with open(LOG, "a", encoding="utf-8") as f:
                f.write("initialize\n")
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "forgetful", "version": "1"}}
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": result}, session)
        if self.headers.get("Mcp-Session-Id") not in SESSIONS:
            error = {"code": -32600, "message": "Bad Request: No valid session ID provided"}
            return self.answer(400, {"jsonrpc": "2.0", "id": "server-error", "error": error})
        if id_ is None:
            if method == "notifications/cancelled":
                with open(LOG, "a", encoding="utf-8") as f:
                    f.write(f"cancelled {message.get('params', {}).get('requestId')}\n")
            return self.answer(202)
        if method == "tools/call" and message["params"]["name"] == "hang":
            with open(LOG, "a", encoding="utf-8") as f:
                f.write("call hang\n")
            time.sleep(60)
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "late"}]}})
        if method == "tools/list":
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {"tools": TOOLS}})
        if method == "tools/call" and message["params"]["name"] == "refuse":
            error = {"code": -32000, "message": "Bad Request: refused for no reason given"}
            return self.answer(400, {"jsonrpc": "2.0", "id": None, "error": error})
        if method == "tools/call" and message["params"]["name"] == "garbled":
            text = message["params"].get("arguments", {}).get("text", "")
            answer = {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": text}]}}
            data = ("event: message\ndata: <<not json at all>>\n\n"
                    f"event: message\ndata: {json.dumps(answer)}\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        if method == "tools/call":
            name = message["params"]["name"]
            text = message["params"].get("arguments", {}).get("text", "") if name == "echo" else "forgotten"
            if name == "forget":
                SESSIONS.clear()
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": text}]}})
        return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {}})

    def do_GET(self):
        self.answer(405)

    def do_DELETE(self):
        self.answer(405)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Forgetful)
print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
server.serve_forever()
