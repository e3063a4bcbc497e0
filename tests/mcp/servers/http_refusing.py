"""An HTTP endpoint that refuses every request as an MCP server behind an
authorization check would: 401 with a Bearer challenge, or 403 for an
insufficient scope with `--forbid`. Standard library only.

Usage: http_refusing.py LOG [--forbid]. Prints its URL on stdout, then
appends `METHOD` to LOG for every request it refuses.
"""

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]
FORBID = "--forbid" in sys.argv[2:]


class Refuse(BaseHTTPRequestHandler):
    def refuse(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(self.command + "\n")
        body = b'{"error":"unauthorized"}'
        if FORBID:
            self.send_response(403)
            self.send_header("WWW-Authenticate", 'Bearer error="insufficient_scope", scope="tools"')
        else:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="tools", error="invalid_token"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = refuse

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
server.serve_forever()
