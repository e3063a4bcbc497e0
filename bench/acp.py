"""Figures for `cordis acp`, driven over raw JSON-RPC on pipes (the Python
standard library only, so the client adds as little as it can):

1. prompt → first update: in a running `cordis acp` with a session open, the
   time from writing `session/prompt` to reading its first `session/update`
   (a one-step scripted turn). Baseline, interleaved: the same turn through
   `cordis run --session ID --script FILE`, from starting the process to
   its first line of the answer on stdout.
2. `session/load` of a 10 000-event session: starting `cordis acp`,
   `initialize`, `session/load` until its answer (every event replayed as
   updates before it), in a new process each time. Baseline, interleaved:
   `cordis session show ID` on the same session, start to exit. The
   target is 2×, not 1×: the replay sends every call's arguments as raw
   input and every plan whole, each update in its own JSON-RPC envelope,
   where `session show` prints a transcript.

    python bench/acp.py CORDIS_BINARY PLUGIN_DIR [RUNS]

Prints its rows of the benchmark table (six columns: figure, ours,
baseline, ratio, target, verdict), for bench/run.sh to put in its one table.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TODO = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n"


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return statistics.median(xs), q[0], q[2]


class Agent:
    """`cordis acp` on pipes."""

    def __init__(self, cordis, plugins, folder, script):
        self.p = subprocess.Popen(
            [cordis, "-c", os.path.join(folder, "cordis.yml"), "--plugin-dir", plugins, "--no-user-patch", "acp", "--script", script],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=folder)
        self.next = 0

    def send(self, method, params):
        self.next += 1
        self.p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}) + "\n").encode())
        self.p.stdin.flush()
        return self.next

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("cordis acp ended early")
        return json.loads(line)

    def answer(self, wanted):
        updates = 0
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("cordis acp ended early")
            # Updates are counted, not parsed: the figure is the agent's.
            if line.startswith(b'{"jsonrpc":"2.0","method":"session/update"'):
                updates += 1
                continue
            m = json.loads(line)
            if m.get("id") == wanted:
                if "error" in m:
                    raise SystemExit(f"cordis acp refused: {m['error']}")
                return m["result"], updates

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def long_session(cordis, plugins, folder, events):
    """A session of at least `events` events, written by `cordis run`: each
    turn is 60 todo_write steps."""
    steps = []
    for i in range(60):
        todos = [{"content": f"item {j} of step {i}", "status": "completed" if j < i % 5 else "pending"} for j in range(5)]
        steps.append({"text": f"step {i}", "calls": [{"name": "todo_write", "arguments": json.dumps({"todos": todos})}]})
    steps.append({"text": "done"})
    script = os.path.join(folder, "long.yml")
    with open(script, "w") as f:
        json.dump({"steps": steps}, f)
    base = [cordis, "-c", os.path.join(folder, "cordis.yml"), "--plugin-dir", plugins, "--no-user-patch"]
    out = subprocess.run(base + ["run", "--script", script, "turn 1"], capture_output=True, text=True, cwd=folder, check=True).stdout
    session = out.split()[1]
    while True:
        log = os.path.join(folder, ".cordis", "sessions", session + ".jsonl")
        with open(log) as f:
            n = sum(1 for _ in f) - 1
        if n >= events:
            return session, n
        subprocess.run(base + ["run", "--session", session, "--script", script, "another turn"], capture_output=True, cwd=folder, check=True)


def main():
    cordis, plugins = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    folder = tempfile.mkdtemp(prefix="cordis-acp-bench-")
    with open(os.path.join(folder, "cordis.yml"), "w") as f:
        f.write(TODO)
    one = os.path.join(folder, "one.yml")
    with open(one, "w") as f:
        # Enough steps for every prompt of the run, one answer each.
        json.dump({"steps": [{"text": "hello"}] * (runs + 1)}, f)
    base = [cordis, "-c", os.path.join(folder, "cordis.yml"), "--plugin-dir", plugins, "--no-user-patch"]

    # 1. prompt → first update, beside `cordis run` → first answer line.
    agent = Agent(cordis, plugins, folder, one)
    agent.answer(agent.send("initialize", {"protocolVersion": 1}))
    result, _ = agent.answer(agent.send("session/new", {"cwd": folder, "mcpServers": []}))
    acp_session = result["sessionId"]
    out = subprocess.run(base + ["run", "--script", one, "first"], capture_output=True, text=True, cwd=folder, check=True).stdout
    run_session = out.split()[1]
    ours, theirs = [], []
    for i in range(runs):
        for kind in (("acp", "run") if i % 2 == 0 else ("run", "acp")):
            if kind == "acp":
                t = time.perf_counter()
                wanted = agent.send("session/prompt", {"sessionId": acp_session, "prompt": [{"type": "text", "text": "hi"}]})
                first = agent.read()
                ours.append(time.perf_counter() - t)
                assert first.get("method") == "session/update", first
                agent.answer(wanted)
            else:
                t = time.perf_counter()
                p = subprocess.Popen(base + ["run", "--session", run_session, "--script", one, "hi"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=folder)
                p.stdout.readline()  # "session ... (continued, N events)"
                p.stdout.readline()  # the answer's first line
                theirs.append(time.perf_counter() - t)
                p.stdout.read()
                p.wait()
    agent.close()
    o, t = quartiles(ours), quartiles(theirs)
    rows = [(
        "`cordis acp`: prompt → first update",
        f"a one-step scripted turn in a running `cordis acp`: {o[0]*1000:.2f} ms (IQR {o[1]*1000:.2f}–{o[2]*1000:.2f}, n={len(ours)})",
        f"the same turn by `cordis run --session`, start → first answer line: {t[0]*1000:.2f} ms (IQR {t[1]*1000:.2f}–{t[2]*1000:.2f}, n={len(theirs)})",
        o[0] / t[0], 1.0,
    )]

    # 2. session/load of a 10 000-event session, beside `session show`.
    session, events = long_session(cordis, plugins, folder, 10000)
    ours, theirs, replayed = [], [], 0
    for i in range(max(5, runs // 2)):
        for kind in (("acp", "show") if i % 2 == 0 else ("show", "acp")):
            t = time.perf_counter()
            if kind == "acp":
                agent = Agent(cordis, plugins, folder, one)
                agent.answer(agent.send("initialize", {"protocolVersion": 1}))
                _, replayed = agent.answer(agent.send("session/load", {"sessionId": session, "cwd": folder, "mcpServers": []}))
                ours.append(time.perf_counter() - t)
                agent.close()
            else:
                subprocess.run(base + ["session", "show", session], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder, check=True)
                theirs.append(time.perf_counter() - t)
    o, t = quartiles(ours), quartiles(theirs)
    rows.append((
        f"`cordis acp`: `session/load` of {events:,} events",
        f"start, `initialize`, `session/load` until its answer ({replayed:,} updates replayed): {o[0]*1000:.1f} ms (IQR {o[1]*1000:.1f}–{o[2]*1000:.1f}, n={len(ours)})",
        f"`cordis session show` of the same session: {t[0]*1000:.1f} ms (IQR {t[1]*1000:.1f}–{t[2]*1000:.1f}, n={len(theirs)})",
        o[0] / t[0], 2.0,
    ))

    print("| figure | ours | baseline (same run) | ratio | target | verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    for figure, ours_text, base_text, ratio, target in rows:
        verdict = "met" if ratio <= target else "missed"
        print(f"| {figure} | {ours_text} | {base_text} | {ratio:.2f}× | ≤ {target:g}× | {verdict} |")


if __name__ == "__main__":
    main()
