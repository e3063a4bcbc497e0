"""Figures for `cordis web`, in headless Chromium (Debian's), driven by
Playwright for Python (installed by tests/web/setup.sh):

1. append → visible: a `cordis dev` console in another process appends a
   todo_write; the time until the open page shows the new plan, p50 and
   p99. Baseline, interleaved: the same append, then the page reloaded by
   hand (reload → the new plan shown).
2. first view of a 100 000-event session: page load until the plan strip
   and the last page are shown. Baseline: the same bytes served as a
   static file (Python's http.server) and loaded the same way.

    python bench/web.py CORDIS_BINARY PLUGIN_DIR [RUNS]
"""

import http.server
import json
import os
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from playwright.sync_api import sync_playwright

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TODO = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def start_web(exe, folder, env):
    web = subprocess.Popen([exe, "web", "--http", "127.0.0.1:0"], cwd=folder, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in web.stderr:
        if " at http://" in line:
            threading.Thread(target=lambda: web.stderr.read(), daemon=True).start()
            return web, line.strip().rsplit(" at ", 1)[1].rstrip("/")
    raise RuntimeError("cordis web did not start")


def big_log(path, events):
    """A session of `events` events: turns of a prompt and steps calling
    todo_write, the agent loop's shapes."""
    with open(path, "w") as f:
        f.write(json.dumps({"type": "session", "version": 0, "id": "big", "createdAt": 0, "cwd": "/", "delegationDepth": 0}) + "\n")
        seq, turn = 0, 0

        def put(kind, data, surface=False):
            nonlocal seq
            e = {"seq": seq, "time": 1_790_000_000_000 + seq, "type": kind, "data": data}
            if surface:
                e["surfaceOp"] = "append"
            f.write(json.dumps(e) + "\n")
            seq += 1

        while seq + 30 <= events:
            turn += 1
            put("turn/start", {"turn": turn})
            put("user/message", {"content": [{"type": "text", "text": f"prompt {turn}"}], "role": "user"}, True)
            for step in range(1, 5):
                todos = [{"content": f"task {i}", "status": ["completed", "in_progress", "pending"][(i + step) % 3]} for i in range(5)]
                args = json.dumps({"todos": todos})
                cid = f"c{turn}_{step}"
                put("step/start", {"turn": turn, "step": step})
                put("assistant/message", {"turn": turn, "step": step, "message": {"role": "assistant", "content": [
                    {"type": "text", "text": f"step {step}"}, {"type": "tool-call", "id": cid, "name": "todo_write", "arguments": args}]}}, True)
                put("tool/call", {"turn": turn, "step": step, "callId": cid, "name": "todo_write", "arguments": args})
                put("todo/write", {"todos": todos})
                put("tool/result", {"turn": turn, "step": step, "message": {"role": "user", "content": [
                    {"type": "tool-result", "toolCallId": cid, "content": [{"type": "text", "text": "ok"}], "isError": False}]}}, True)
                put("step/end", {"turn": turn, "step": step})
            while seq % 30 != 29:
                put("session/note", {"n": seq})
            put("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        while seq < events:
            put("session/note", {"n": seq})


def main():
    exe, plugins = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    folder = tempfile.mkdtemp(prefix="cordis-web-bench-")
    with open(os.path.join(folder, "cordis.yml"), "w") as f:
        f.write(TODO)
    env = dict(os.environ, CORDIS_PLUGIN_PATH=plugins, XDG_CONFIG_HOME=os.path.join(folder, ".config"))
    env.pop("RUST_LOG", None)
    dev = subprocess.Popen([exe, "dev"], cwd=folder, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    sid = json.loads(dev.stdout.readline())["session"]

    def write(n):
        todos = [{"content": "a", "status": "completed"}, {"content": f"run {n}", "status": "in_progress"}]
        dev.stdin.write("call todo_write " + json.dumps({"todos": todos}) + "\n")
        dev.stdin.flush()
        assert json.loads(dev.stdout.readline())["isError"] is False

    write(0)
    web, base = start_web(exe, folder, env)
    wait = "([s, t]) => [...document.querySelectorAll(s)].some(e => e.innerText.includes(t))"
    live, reload = [], []
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(), executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        page.goto(f"{base}/s/{sid}")
        page.wait_for_function(wait, arg=["#live-status", "Live"])
        n = 1
        for _ in range(runs):
            # Live: the append, then the change on the open page.
            t0 = time.monotonic()
            write(n)
            page.wait_for_function(wait, arg=[".row-head", f"run {n}"], polling="raf")
            live.append((time.monotonic() - t0) * 1000)
            n += 1
            # Baseline: the append, then a reload by hand.
            t0 = time.monotonic()
            write(n)
            page.reload()
            page.wait_for_function(wait, arg=[".row-head", f"run {n}"], polling="raf")
            reload.append((time.monotonic() - t0) * 1000)
            n += 1
            page.wait_for_function(wait, arg=["#live-status", "Live"])
        dev.kill()
        # First view of a 100 000-event session, against the same bytes served statically.
        big_log(os.path.join(folder, ".cordis", "sessions", "big.jsonl"), 100_000)
        static_dir = tempfile.mkdtemp()
        html = page.request.get(f"{base}/s/big").text()
        with open(os.path.join(static_dir, "big.html"), "w") as f:
            f.write(html)
        handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=static_dir)
        http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
        server = socketserver.TCPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        static_url = f"http://127.0.0.1:{server.server_address[1]}/big.html"
        first, static = [], []
        for _ in range(max(5, runs // 3)):
            t0 = time.monotonic()
            page.goto(f"{base}/s/big", wait_until="load")
            page.wait_for_function(wait, arg=[".plan-counts", "in progress"])
            first.append((time.monotonic() - t0) * 1000)
            t0 = time.monotonic()
            page.goto(static_url, wait_until="load")
            page.wait_for_function(wait, arg=[".plan-counts", "in progress"])
            static.append((time.monotonic() - t0) * 1000)
        server.shutdown()
        ctx.close()
    web.kill()
    size = len(html.encode())
    print("| figure | ours | baseline (same run) | ratio | target | verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| append → visible (live page) | p50 {pct(live, 50):.0f} ms, p99 {pct(live, 99):.0f} ms (n={len(live)}) | "
          f"append, then the page reloaded by hand: p50 {pct(reload, 50):.0f} ms, p99 {pct(reload, 99):.0f} ms (n={len(reload)}) | "
          f"{pct(reload, 50) / pct(live, 50):.1f}× faster at p50 | report | reported |")
    print(f"| first view, 100 000 events | page load to the plan and the last page: p50 {pct(first, 50):.0f} ms "
          f"(IQR {pct(first, 25):.0f}–{pct(first, 75):.0f} ms, n={len(first)}; page {size // 1024} KiB) | "
          f"the same bytes as a static file: p50 {pct(static, 50):.0f} ms (n={len(static)}) | "
          f"{statistics.median(first) / statistics.median(static):.1f}× slower | report | reported |")


if __name__ == "__main__":
    main()
