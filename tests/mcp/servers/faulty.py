"""A raw JSON-RPC MCP server over stdio that misbehaves on request.

Standard library only. Its faults are chosen on the command line:

  --marker TEXT    nothing but a word in its argv (and its helper's), which
                   the tests look for in the process table
  --helper         forks a helper that ignores SIGTERM and sleeps forever
  --stubborn       ignores SIGTERM, SIGINT and SIGHUP, and keeps running
                   when its stdin closes
  --stderr-flood   writes long lines to stderr without pause
  --list-storm     sends notifications/tools/list_changed after every
                   tools/list
  --log FILE       appends what happens: `started PID`, `list`,
                   `call TOOL`, `cancelled ID`, `env NAME=VALUE` for
                   `--env` names
  --env NAME       reports variable NAME (set or `unset`) in the log at start

Tools: echo {text}; hang (never answers); big {bytes} (a text result of
that many bytes, its `id` written last, as JSON.stringify writes it);
cp949 (a text in CP949, not UTF-8); pid; structured {n} (a result with
structuredContent).
"""

import json
import os
import signal
import sys
import threading
import time

ARGS = sys.argv[1:]
LOG = ARGS[ARGS.index("--log") + 1] if "--log" in ARGS else None


def log(line):
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def send_bytes(data):
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def send(message):
    send_bytes(json.dumps(message, separators=(",", ":")).encode())


def answer(id_, result):
    send({"jsonrpc": "2.0", "id": id_, "result": result})


TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object", "properties": props}}
    for name, props in [
        ("echo", {"text": {"type": "string"}}),
        ("hang", {}),
        ("big", {"bytes": {"type": "integer"}}),
        ("cp949", {}),
        ("pid", {}),
        ("structured", {"n": {"type": "integer"}}),
    ]
]


def call(id_, name, args):
    if name == "echo":
        answer(id_, {"content": [{"type": "text", "text": args.get("text", "")}]})
    elif name == "hang":
        pass
    elif name == "big":
        text = "x" * int(args.get("bytes", 0))
        # `result` first and `id` last, as the TypeScript SDK writes it.
        body = json.dumps({"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": text}]}}, separators=(",", ":"))
        send_bytes(body[:-1].encode() + b',"id":' + json.dumps(id_).encode() + b"}")
    elif name == "cp949":
        head = json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": ""}]}}, separators=(",", ":"))
        at = head.index('"text":""') + len('"text":"')
        send_bytes(head[:at].encode() + "한국어".encode("cp949") + head[at:].encode())
    elif name == "pid":
        answer(id_, {"content": [{"type": "text", "text": str(os.getpid())}]})
    elif name == "structured":
        n = int(args.get("n", 0))
        answer(id_, {"content": [{"type": "text", "text": f"n is {n}"}], "structuredContent": {"n": n, "double": 2 * n}})
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": f"no tool {name}"}})


def flood():
    line = ("chatter " * 2000).encode()
    while True:
        try:
            os.write(2, line + b"\n")
        except OSError:
            return


def main():
    if "--stubborn" in ARGS:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    if "--helper" in ARGS:
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.close(0)
            while True:
                time.sleep(60)
    log(f"started {os.getpid()}")
    for i, arg in enumerate(ARGS):
        if arg == "--env" and i + 1 < len(ARGS):
            name = ARGS[i + 1]
            log(f"env {name}={os.environ.get(name, 'unset')}")
    if "--stderr-flood" in ARGS:
        threading.Thread(target=flood, daemon=True).start()
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        method, id_ = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            answer(id_, {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "faulty", "version": "1"},
            })
        elif method == "tools/list":
            log("list")
            answer(id_, {"tools": TOOLS})
            if "--list-storm" in ARGS:
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif method == "tools/call":
            log(f"call {params.get('name')}")
            call(id_, params.get("name"), params.get("arguments") or {})
        elif method == "notifications/cancelled":
            log(f"cancelled {params.get('requestId')}")
        elif id_ is not None:
            answer(id_, {})
    if "--stubborn" in ARGS:
        while True:
            time.sleep(60)


main()
