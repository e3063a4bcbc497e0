#!/usr/bin/env bash
# The MCP throughput figure: 1000 sequential `todo_write` calls from the
# official Python SDK over stdio to `cordis mcp`, beside the same 1000 calls
# made in process through the server's own call path (bench/src/bin/
# mcp-inproc.rs: no protocol, transport or client), in the same run,
# interleaved, at each durability. Prints a Markdown table (stdout) in the
# six columns of bench/run.sh's table, which takes its rows.
#
#   bench/mcp.sh [CALLS] [RUNS]      defaults: 1000 calls, 5 runs each
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-1000}"
runs="${2:-5}"

cargo build --release -p cordis -p tool-todo -p cordis-bench >&2
bash tests/mcp/setup.sh target/mcp-peers >&2
python=target/mcp-peers/python/bin/python
cordis="$PWD/target/release/cordis"
# On the same disk as the repository (not /tmp, which may be a RAM disk
# where fdatasync costs nothing).
scratch="$PWD/target/release/bench-scratch/mcp"
rm -rf "$scratch"
mkdir -p "$scratch"
printf -- '- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n' > "$scratch/cordis.yml"
results="$scratch/results.jsonl"
: > "$results"

for durability in event none; do
  for run in $(seq 1 "$runs"); do
    # Alternate which goes first.
    order="inproc stdio"
    [ $((run % 2)) = 0 ] && order="stdio inproc"
    for kind in $order; do
      state="$scratch/state-$durability-$kind-$run"
      if [ "$kind" = inproc ]; then
        line="$(target/release/mcp-inproc "$calls" "$state" "$durability")"
      else
        line="$("$python" tests/mcp/client.py bench "$calls" "$cordis" -c "$scratch/cordis.yml" \
          --plugin-dir target/release --no-user-patch --state-dir "$state" --durability "$durability" mcp)"
      fi
      echo "{\"kind\": \"$kind\", \"durability\": \"$durability\", \"result\": $line}" >> "$results"
      echo "$durability $kind run $run: $line" >&2
    done
  done
done

python3 - "$results" "$calls" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
calls = sys.argv[2]
def q(xs):
    xs = sorted(xs)
    qs = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0], xs[0], xs[0]]
    return statistics.median(xs), qs[0], qs[2], len(xs)
def fmt(v):
    return f"{v/1000:.2f}k/s" if v >= 1000 else f"{v:.0f}/s"
print("| figure | ours | baseline (same run) | ratio | target | verdict |")
print("| --- | --- | --- | --- | --- | --- |")
for d in ("event", "none"):
    pick = lambda k: [r["result"]["calls_per_s"] for r in rows if r["kind"] == k and r["durability"] == d]
    assert all(r["result"]["errors"] == 0 for r in rows), "a call failed"
    s, i = q(pick("stdio")), q(pick("inproc"))
    print(f"| MCP over stdio, `--durability {d}` | {calls} sequential `todo_write` calls from the Python SDK over stdio: {fmt(s[0])} (IQR {fmt(s[1])}–{fmt(s[2])}, n={s[3]}) "
          f"| the same calls in process through the server's call path: {fmt(i[0])} (IQR {fmt(i[1])}–{fmt(i[2])}, n={i[3]}) | {s[0]/i[0]:.2f}× of in-process | report | reported |")
PY
