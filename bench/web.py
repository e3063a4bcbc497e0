"""Figures for `cordis web`, in headless Chromium (Debian's), driven by
Playwright for Python (installed by tests/web/setup.sh):

1. append → visible: a `cordis dev` console in another process appends a
   todo_write; the time until the open page shows the new plan, p50 and
   p99. Baseline, interleaved: the same append, then the page reloaded by
   hand (reload → the new plan shown).
2. first view of a 100 000-event session: page load until the plan strip
   and the last page are shown. Baseline: the same bytes served as a
   static file (Python's http.server) and loaded the same way.
3. append → visible on a 20 000-event session, with 1 viewer (the
   browser page) and with 20 (the page and 19 more streams of the same
   session over plain HTTP): a turn appended to the log file, until the
   page shows it. Baselines: the same on a 2 000-event session (1
   viewer), and the 1-viewer figure (20 viewers).
4. server memory (RSS) with those 20 viewers, and 10 s after they left.
   Baseline: the server's RSS before the first viewer of that session.
5. the server's CPU time per append on the 20 000-event session with one
   viewer. Baseline: the same on a 2 000-event session. The server's CPU
   while the page is open and nothing is appended (its followers' polls,
   for the same time as the appends took) is measured first and taken
   off, so the figure is the appends' own work; the raw figure is shown
   too.

Figures 3 to 5 are taken before figure 2, whose 100 000-event session
would otherwise be in the server's memory.

    python bench/web.py CORDIS_BINARY PLUGIN_DIR [RUNS] [--rows FILE]

It prints its rows of the benchmark table (six columns: figure, ours,
baseline, ratio, target, verdict); with --rows it writes them to FILE too,
for bench/run.sh to put in its one table.
"""

import http.server
import json
import os
import shutil
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


def big_log(path, events, sid="big"):
    """A session of `events` events: turns of a prompt and steps calling
    todo_write, the agent loop's shapes."""
    with open(path, "w") as f:
        f.write(json.dumps({"type": "session", "version": 0, "id": sid, "createdAt": 0, "cwd": "/", "delegationDepth": 0}) + "\n")
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
                    {"type": "tool-result", "toolCallId": cid, "content": [{"type": "text", "text": "ok"}], "isError": False}],
                    "source": {"kind": "tool", "callId": cid}}}, True)
                put("step/end", {"turn": turn, "step": step})
            while seq % 30 != 29:
                put("session/note", {"n": seq})
            put("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        while seq < events:
            put("session/note", {"n": seq})


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_ms(pid):
    """The CPU time (user and system) process `pid` has used, in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def verdict(ratio, limit, at_most):
    met = ratio <= limit if at_most else ratio >= limit
    if met:
        return "met"
    return f"missed: {ratio / limit:.2f}× over the limit" if at_most else f"missed: {(1 - ratio / limit) * 100:.0f}% short"


class Stream:
    """One more viewer: a session page's stream over plain HTTP, read and
    discarded on a thread of its own."""

    def __init__(self, base, path):
        import http.client
        import urllib.parse
        u = urllib.parse.urlparse(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream"})
        self.response = self.conn.getresponse()
        assert self.response.status == 200, self.response.status
        self.closed = False
        threading.Thread(target=self.drain, daemon=True).start()

    def drain(self):
        try:
            while not self.closed and self.response.fp.readline():
                pass
        except Exception:
            pass

    def close(self):
        self.closed = True
        try:
            self.response.fp.raw._sock.shutdown(2)
        except Exception:
            pass
        self.conn.close()


def append_turn(path, n):
    """Appends a turn whose prompt is `append N` to the log at `path`."""
    with open(path, "rb") as f:
        f.seek(-4096, 2)
        last = json.loads(f.read().decode(errors="replace").strip().split("\n")[-1])
    seq, turn = last["seq"] + 1, 100_000 + n
    lines = [
        {"seq": seq, "time": 1_800_000_000_000 + seq, "type": "turn/start", "data": {"turn": turn}},
        {"seq": seq + 1, "time": 1_800_000_000_000 + seq, "type": "user/message", "surfaceOp": "append",
         "data": {"content": [{"type": "text", "text": f"append {n}"}], "role": "user"}},
        {"seq": seq + 2, "time": 1_800_000_000_000 + seq, "type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}},
    ]
    with open(path, "a") as f:
        f.write("".join(json.dumps(l) + "\n" for l in lines))


def appends_measured(pid, page, wait, log, count):
    """`count` turns appended to the log at `log`, each waited for on the
    open page: the append → visible times (ms), and the server's CPU per
    append (ms) with its idle CPU for the same time taken off, and raw.
    The idle CPU is measured first, on the same open page, for 10 s."""
    idle_t0, idle_cpu0 = time.monotonic(), cpu_ms(pid)
    time.sleep(10)
    idle_rate = (cpu_ms(pid) - idle_cpu0) / (time.monotonic() - idle_t0)
    times = []
    t_start, cpu0 = time.monotonic(), cpu_ms(pid)
    for k in range(count):
        t0 = time.monotonic()
        append_turn(log, k + 1)
        page.wait_for_function(wait, arg=[".item.user .text", f"append {k + 1}"], polling="raf", timeout=60_000)
        times.append((time.monotonic() - t0) * 1000)
    raw = cpu_ms(pid) - cpu0
    net = raw - idle_rate * (time.monotonic() - t_start)
    return times, max(net, 0.0) / count, raw / count


def main():
    args = sys.argv[1:]
    rows_file = None
    if "--rows" in args:
        at = args.index("--rows")
        rows_file = args[at + 1]
        del args[at:at + 2]
    exe, plugins = os.path.abspath(args[0]), os.path.abspath(args[1])
    runs = int(args[2]) if len(args) > 2 else 30
    # Everything the run writes (the logs, the browser's profile, the
    # static copy) goes under one folder, removed at the end.
    scratch = tempfile.mkdtemp(prefix="cordis-web-bench-")
    try:
        measure(exe, plugins, runs, rows_file, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(exe, plugins, runs, rows_file, scratch):
    # The CPU figures count clock ticks (10 ms): enough appends that the
    # total is many ticks.
    cpu_runs = max(5 * runs, 30)
    folder = os.path.join(scratch, "work")
    os.mkdir(folder)
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
        ctx = p.chromium.launch_persistent_context(os.path.join(scratch, "chromium"), executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
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
        # Appends to a 2 000-event session: the baselines of the same
        # figures on 20 000 events below.
        small = os.path.join(folder, ".cordis", "sessions", "big2k.jsonl")
        big_log(small, 2_000, "big2k")
        page.goto(f"{base}/s/big2k")
        page.wait_for_function(wait, arg=["#live-status", "Live"])
        small_lat, cpu_small, raw_small = appends_measured(web.pid, page, wait, small, cpu_runs)
        page.goto("about:blank")
        time.sleep(6)

        # A 20 000-event session, watched by 1 viewer, then by 20.
        log = os.path.join(folder, ".cordis", "sessions", "big20k.jsonl")
        big_log(log, 20_000, "big20k")
        time.sleep(1)
        idle_kib = rss_kib(web.pid)
        page.goto(f"{base}/s/big20k")
        page.wait_for_function(wait, arg=["#live-status", "Live"])
        live_url = page.evaluate("document.getElementById('main').getAttribute('data-live')")
        one, cpu_big, raw_big = appends_measured(web.pid, page, wait, log, cpu_runs)
        n = cpu_runs

        def appended():
            nonlocal n
            n += 1
            t0 = time.monotonic()
            append_turn(log, n)
            page.wait_for_function(wait, arg=[".item.user .text", f"append {n}"], polling="raf", timeout=60_000)
            return (time.monotonic() - t0) * 1000
        # 19 more viewers, each resuming from what the page shows now.
        last = page.evaluate("document.getElementById('main').getAttribute('data-last')")
        path = live_url.split("&after=")[0] + f"&after={last}" if "&after=" in live_url else live_url
        streams = [Stream(base, path) for _ in range(19)]
        time.sleep(1)
        twenty = [appended() for _ in range(runs)]
        time.sleep(0.5)
        with_kib = rss_kib(web.pid)
        for st in streams:
            st.close()
        page.goto("about:blank")
        time.sleep(10)
        after_kib = rss_kib(web.pid)
        # First view of a 100 000-event session, against the same bytes served statically.
        big_log(os.path.join(folder, ".cordis", "sessions", "big.jsonl"), 100_000)
        static_dir = os.path.join(scratch, "static")
        os.mkdir(static_dir)
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
            # A first view: the session's follower, kept 5 s after its last
            # page, has gone, so the view reads the log.
            page.goto("about:blank")
            time.sleep(6)
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
    rows = [
        ("append → visible (live page)",
         f"p50 {pct(live, 50):.0f} ms, p99 {pct(live, 99):.0f} ms (n={len(live)})",
         f"append, then the page reloaded by hand: p50 {pct(reload, 50):.0f} ms, p99 {pct(reload, 99):.0f} ms (n={len(reload)})",
         f"{pct(reload, 50) / pct(live, 50):.1f}× faster at p50", "≥ 1× faster", verdict(pct(reload, 50) / pct(live, 50), 1.0, False)),
        ("first view, 100 000 events",
         f"page load to the plan and the last page: p50 {pct(first, 50):.0f} ms (IQR {pct(first, 25):.0f}–{pct(first, 75):.0f} ms, n={len(first)}; page {size // 1024} KiB)",
         f"the same bytes as a static file: p50 {pct(static, 50):.0f} ms (n={len(static)})",
         f"{statistics.median(first) / statistics.median(static):.1f}× slower", "reported", "reported"),
        ("append → visible, 20 000 events, 1 viewer",
         f"p50 {pct(one, 50):.0f} ms, p99 {pct(one, 99):.0f} ms (n={len(one)})",
         f"the same on 2 000 events: p50 {pct(small_lat, 50):.0f} ms, p99 {pct(small_lat, 99):.0f} ms (n={len(small_lat)})",
         f"{pct(one, 50) / pct(small_lat, 50):.2f}× at p50", "p99 ≤ 1000 ms; ≤ 1.5× at p50",
         "met" if pct(one, 99) <= 1000 and pct(one, 50) / pct(small_lat, 50) <= 1.5
         else f"missed: p99 {pct(one, 99):.0f} ms, {pct(one, 50) / pct(small_lat, 50):.2f}× at p50"),
        ("append → visible, 20 000 events, 20 viewers",
         f"the page, with 19 more streams of the session: p50 {pct(twenty, 50):.0f} ms, p99 {pct(twenty, 99):.0f} ms (n={len(twenty)})",
         f"1 viewer: p50 {pct(one, 50):.0f} ms",
         f"{pct(twenty, 50) / pct(one, 50):.2f}× at p50", "≤ 1.5×", verdict(pct(twenty, 50) / pct(one, 50), 1.5, True)),
        ("server CPU per append, 20 000 events, 1 viewer",
         f"{cpu_big:.1f} ms with the idle polling taken off ({raw_big:.1f} ms raw; n={cpu_runs})",
         f"the same on 2 000 events: {cpu_small:.1f} ms ({raw_small:.1f} ms raw)",
         f"{cpu_big / max(cpu_small, 0.1):.2f}× ({raw_big / max(raw_small, 0.1):.2f}× raw)", "≤ 1.5× (independent of the log's length)",
         verdict(cpu_big / max(cpu_small, 0.1), 1.5, True)),
        ("server RSS, 20 viewers of a 20 000-event session",
         f"{with_kib / 1024:.0f} MiB",
         f"before the first viewer: {idle_kib / 1024:.0f} MiB",
         f"{with_kib / idle_kib:.2f}×", "≤ 3×", verdict(with_kib / idle_kib, 3.0, True)),
        ("server RSS, 10 s after the 20 viewers left",
         f"{after_kib / 1024:.0f} MiB",
         f"before the first viewer: {idle_kib / 1024:.0f} MiB",
         f"{after_kib / idle_kib:.2f}×", "≤ 1.5×", verdict(after_kib / idle_kib, 1.5, True)),
    ]
    out = "| figure | ours | baseline (same run) | ratio | target | verdict |\n| --- | --- | --- | --- | --- | --- |\n"
    out += "".join("| " + " | ".join(r) + " |\n" for r in rows)
    print(out, end="")
    if rows_file:
        with open(rows_file, "w") as f:
            f.write(out)


if __name__ == "__main__":
    main()
