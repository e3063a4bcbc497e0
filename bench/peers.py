"""The timing half of bench/peers.sh: boots and hot reloads of cordis and
its Rust peers, interleaved, in one run. peers.sh builds everything and
passes what to run through PEERS_* environment variables; this prints the
markdown table on stdout.

Boot: wall time from spawn until the host shows it is ready (or exits, for
`cordis check`), read with time.perf_counter; the process group is then
killed, untimed.

Reload: each host runs on a composition naming a private copy of its
minimal plugin in plugins/; a new build (the library plus N trailing zero
bytes, so its content is new and its code the same) is written in a sibling
folder and renamed into place, and timed from the rename until the host's
line saying the new build serves. Lines are stamped by reader threads as
they arrive.
"""

import json
import os
import queue
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

RUNS = int(os.environ["PEERS_RUNS"])
RELOADS = int(os.environ["PEERS_RELOADS"])
PEERS = os.environ["PEERS_DIR"]
ROOT = os.environ["PEERS_ROOT"]
RUN = os.path.join(PEERS, "run")
CORDIS = os.path.join(ROOT, "target", "release", "cordis")
EAVAE_TARGET = os.path.join(PEERS, "cordis-rs-target", "release")
DSHBOX_TARGET = os.path.join(PEERS, "dshbox-cordis-rs-target", "release")
WITH_DSHBOX = bool(os.environ.get("PEERS_DSHBOX_COMMIT"))
TIMEOUT = 60.0
# A dshbox worker restart waits 100 ms, doubling when the previous worker
# lived under 10 s: reloads there are spaced so that each pays the first step.
DSHBOX_SPACING = 10.5


def progress(text):
    print(f"bench/peers.py: {text}", file=sys.stderr, flush=True)


class Host:
    """A running process whose stdout and stderr lines are stamped."""

    def __init__(self, cmd, cwd, stdin=True):
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.lines = queue.Queue()
        self.log = []
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for raw in stream:
            self.lines.put((time.perf_counter(), raw.decode("utf-8", "replace").rstrip("\n")))
        self.lines.put((time.perf_counter(), None))

    def wait_for(self, pattern, since):
        """The time of the first line matching pattern, in seconds after since."""
        deadline = time.perf_counter() + TIMEOUT
        closed = 0
        while True:
            try:
                at, line = self.lines.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                raise RuntimeError(f"no line matching {pattern!r} within {TIMEOUT} s; output: {self.log[-20:]}")
            if line is None:
                closed += 1
                if closed == 2:
                    raise RuntimeError(f"exited before {pattern!r}: {self.log[-20:]}")
                continue
            self.log.append(line)
            if re.search(pattern, line):
                return at - since

    def drain(self):
        while True:
            try:
                _, line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is not None:
                self.log.append(line)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


# --------------------------------------------------------------------- boot

def boot_sides():
    ours = os.path.join(RUN, "ours")
    eavae = os.path.join(RUN, "cordis-rs")
    sides = [
        # name, command, folder, ready pattern (None: until exit)
        ("cordis check", [CORDIS, "-c", "cordis.yml", "check"], ours, None),
        # The floor under `cordis check`: the binary starting and exiting.
        ("cordis --version", [CORDIS, "--version"], ours, None),
        ("cordis dev", [CORDIS, "-c", "cordis.yml", "--state-dir", "state", "--durability", "none", "dev"], ours, r'"ready":\s*true'),
        ("eavae cordis-cli", [os.path.join(EAVAE_TARGET, "cordis-cli")], eavae, r"^cordis ready$"),
    ]
    if WITH_DSHBOX:
        dshbox = os.path.join(RUN, "dshbox-cordis-rs")
        sides.append(("dshbox cordis run", [os.path.join(DSHBOX_TARGET, "cordis"), "run", "cordis.json", "--plugin-dir", "plugins"], dshbox, r"worker ready"))
    return sides


def boot_once(cmd, cwd, ready):
    if ready is None:
        start = time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        took = time.perf_counter() - start
        if out.returncode != 0:
            raise RuntimeError(f"{cmd} failed: {out.stderr.decode()}")
        return took
    host = Host(cmd, cwd)
    try:
        return host.wait_for(ready, host.start)
    finally:
        host.kill()


def boots():
    sides = boot_sides()
    times = {name: [] for name, *_ in sides}
    for _, cmd, cwd, ready in sides:
        boot_once(cmd, cwd, ready)  # warms the page cache
    for _ in range(RUNS):
        for name, cmd, cwd, ready in sides:
            times[name].append(boot_once(cmd, cwd, ready))
    return times


# ------------------------------------------------------------------- reload

class Reloading:
    def __init__(self, name, cmd, cwd, library, ready, reloaded):
        self.name, self.cwd, self.reloaded = name, cwd, reloaded
        self.plugin = os.path.join(cwd, "plugins", library)
        self.staged = os.path.join(cwd, "staging", library)
        with open(self.plugin, "rb") as f:
            self.build = f.read()
        self.n = 0
        self.host = Host(cmd, cwd)
        self.host.wait_for(ready, self.host.start)
        self.last = time.perf_counter()

    def reload(self):
        self.n += 1
        with open(self.staged, "wb") as f:
            f.write(self.build + b"\0" * self.n)
        self.host.drain()
        start = time.perf_counter()
        os.rename(self.staged, self.plugin)
        took = self.host.wait_for(self.reloaded, start)
        self.last = time.perf_counter()
        return took


def reloads():
    ours = os.path.join(RUN, "ours")
    sides = [
        Reloading("cordis dev", [CORDIS, "-c", "cordis.yml", "--state-dir", "state", "--durability", "none", "dev"], ours,
                  "libfixture_named.so", r'"ready":\s*true', r"^cordis dev: reloaded "),
        Reloading("eavae reload host, HMR debounce 100 ms (default)", [os.path.join(EAVAE_TARGET, "cordis-reload-host")],
                  os.path.join(RUN, "cordis-rs-hmr-100"), "libcordis_minimal.so", r"^cordis ready$", r"^cordis reloaded "),
        Reloading("eavae reload host, HMR debounce 1 ms", [os.path.join(EAVAE_TARGET, "cordis-reload-host")],
                  os.path.join(RUN, "cordis-rs-hmr-1"), "libcordis_minimal.so", r"^cordis ready$", r"^cordis reloaded "),
    ]
    if WITH_DSHBOX:
        sides.append(Reloading("dshbox cordis run (worker restart)", [os.path.join(DSHBOX_TARGET, "cordis"), "run", "cordis.json", "--plugin-dir", "plugins"],
                               os.path.join(RUN, "dshbox-cordis-rs"), "libminimal.so", r"worker ready", r"worker ready"))
    times = {s.name: [] for s in sides}
    try:
        time.sleep(1.0)
        for _ in range(RELOADS):
            for s in sides:
                if s.name.startswith("dshbox"):
                    wait = DSHBOX_SPACING - (time.perf_counter() - s.last)
                    if wait > 0:
                        time.sleep(wait)
                times[s.name].append(s.reload())
                time.sleep(random.uniform(0.6, 1.2))
    finally:
        for s in sides:
            s.host.kill()
    return times


# -------------------------------------------------------------------- table

def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def ms(x):
    x *= 1000
    return f"{x:.3g} ms" if x < 100 else f"{x:.0f} ms"


def cell(xs):
    lo, mid, hi = quartiles(xs)
    return f"{ms(mid)} (IQR {ms(lo)}–{ms(hi)}, n={len(xs)})"


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def table_rows(boot, reload):
    """The peer figures as rows of bench/run.sh's one table (figure, ours,
    baseline, ratio, target, verdict): ours ÷ the peer's, so below 1 is
    cordis ahead. The boot target (≤ 0.9× eavae/cordis-rs) is issue 46's."""
    eavae = f"eavae/cordis-rs {os.environ['PEERS_EAVAE_COMMIT'][:12]}"
    dshbox = os.environ.get("PEERS_DSHBOX_VERSION") or f"dshbox/cordis-rs {os.environ['PEERS_DSHBOX_COMMIT'][:12]}"
    rows = []

    def row(figure, ours_name, ours_xs, peer_name, peer_xs, target, limit):
        r = statistics.median(ours_xs) / statistics.median(peer_xs)
        if limit is None:
            verdict = "reported"
        elif r <= limit:
            verdict = "met"
        else:
            verdict = f"missed: {r / limit:.2f}× over the limit"
        rows.append(f"| {figure} | {ours_name}: {cell(ours_xs)} | {peer_name}: {cell(peer_xs)} | {r:.2f}× theirs | {target} | {verdict} |")

    row(f"boot vs {eavae}", "`cordis check`, one minimal plugin", boot["cordis check"],
        "its `cordis-cli`, the same plugin work", boot["eavae cordis-cli"], "≤ 0.9×", 0.9)
    row(f"boot floor vs {eavae}", "`cordis --version` (the binary starting and exiting, nothing loaded)", boot["cordis --version"],
        "its `cordis-cli`, the same plugin work", boot["eavae cordis-cli"], "report", None)
    row(f"boot to ready vs {eavae}", "`cordis dev` to ready", boot["cordis dev"],
        "its `cordis-cli` to ready", boot["eavae cordis-cli"], "report", None)
    row(f"reload vs {eavae}", "`cordis dev`, rename → serving", reload["cordis dev"],
        "its reload host, HMR debounce 1 ms", reload["eavae reload host, HMR debounce 1 ms"], "≤ 1×", 1.0)
    if WITH_DSHBOX:
        row(f"boot vs {dshbox}", "`cordis check`, one minimal plugin", boot["cordis check"],
            "its `cordis run` to worker ready", boot["dshbox cordis run"], "report", None)
        row(f"reload vs {dshbox}", "`cordis dev`, rename → serving", reload["cordis dev"],
            "its `cordis run`, worker restart", reload["dshbox cordis run (worker restart)"], "≤ 1×", 1.0)
    return rows


def main():
    load_before = load_average()
    started = datetime.now(timezone.utc)
    progress(f"boot: {RUNS} runs of each side, interleaved")
    boot = boots()
    progress(f"reload: {RELOADS} reloads of each side, interleaved")
    reload = reloads()
    load_after = load_average()
    ours_check = statistics.median(boot["cordis check"])
    ours_dev = statistics.median(boot["cordis dev"])
    out = []
    out.append(f"Measured {started:%Y-%m-%d %H:%M} UTC with `bench/peers.sh`; machine: {os.environ['PEERS_MACHINE']}, "
               f"{os.environ['PEERS_CORES']} cores; load average {load_before} before, {load_after} after; "
               f"{os.environ['PEERS_RUSTC']} for all sides.")
    out.append("")
    out.append(f"Commits: cordis {os.environ['PEERS_OUR_COMMIT']}; eavae/cordis-rs {os.environ['PEERS_EAVAE_COMMIT'][:12]}"
               + (f"; {os.environ.get('PEERS_DSHBOX_VERSION') or 'dshbox/cordis-rs ' + os.environ['PEERS_DSHBOX_COMMIT'][:12]}." if WITH_DSHBOX else "."))
    out.append("")
    out.append("Ratio = peer ÷ ours (above 1: cordis is ahead).")
    out.append("")
    out.append("| figure | side | median (IQR, n) | fastest | ratio to `cordis check` | ratio to `cordis dev` |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for name, xs in boot.items():
        m = statistics.median(xs)
        out.append(f"| boot, spawn → ready | {name} | {cell(xs)} | {ms(min(xs))} | {m / ours_check:.2f}× | {m / ours_dev:.2f}× |")
    ours_reload = statistics.median(reload["cordis dev"])
    out.append("")
    out.append("| figure | side | median (IQR, n) | fastest | ratio to `cordis dev` |")
    out.append("| --- | --- | --- | --- | --- |")
    for name, xs in reload.items():
        m = statistics.median(xs)
        out.append(f"| reload, rename → serving | {name} | {cell(xs)} | {ms(min(xs))} | {m / ours_reload:.2f}× |")
    print("\n".join(out))
    rows_file = os.environ.get("PEERS_ROWS")
    if rows_file:
        with open(rows_file, "w") as f:
            f.write("\n".join(table_rows(boot, reload)) + "\n")
    raw = os.path.join(RUN, "samples.json")
    with open(raw, "w") as f:
        json.dump({"boot": boot, "reload": reload}, f)
    progress(f"raw samples in {raw}")


if __name__ == "__main__":
    main()
