#!/usr/bin/env bash
# The mcp-client throughput figure: N sequential calls of the `echo` tool of
# a stdio MCP server written with the official Python SDK
# (tests/mcp/servers/server.py), made through our `mcp-client` plugin
# (bench/src/bin/mcp-client-calls.rs: the tool registry, the ABI, the
# plugin, rmcp's client), beside the same N calls made by the Python SDK's
# own client (tests/mcp/client.py bench-tool), in the same run,
# interleaved. Prints a Markdown table (stdout) in the six columns of
# bench/run.sh's table, which takes its rows.
#
#   bench/mcp_client.sh [CALLS] [RUNS]      defaults: 1000 calls, 5 runs each
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-1000}"
runs="${2:-5}"

cargo build --release -p mcp-client -p cordis-bench >&2
bash tests/mcp/setup.sh target/mcp-peers >&2
python="$PWD/target/mcp-peers/python/bin/python"
server="$PWD/tests/mcp/servers/server.py"
scratch="$PWD/target/release/bench-scratch/mcp-client"
rm -rf "$scratch"
mkdir -p "$scratch"
results="$scratch/results.jsonl"
: > "$results"
arguments='{"text": "hello"}'

for run in $(seq 1 "$runs"); do
  order="ours python"
  [ $((run % 2)) = 0 ] && order="python ours"
  for kind in $order; do
    if [ "$kind" = ours ]; then
      line="$(target/release/mcp-client-calls "$calls" "$scratch/state-$run" mcp__peer__echo "$arguments" "$python" "$server")"
    else
      line="$("$python" tests/mcp/client.py bench-tool "$calls" echo "$arguments" "$python" "$server")"
    fi
    echo "{\"kind\": \"$kind\", \"result\": $line}" >> "$results"
    echo "$kind run $run: $line" >&2
  done
done

python3 - "$results" "$calls" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
calls = sys.argv[2]
assert all(r["result"]["errors"] == 0 for r in rows), "a call failed"
def q(xs):
    xs = sorted(xs)
    qs = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0], xs[0], xs[0]]
    return statistics.median(xs), qs[0], qs[2], len(xs)
def fmt(v):
    return f"{v/1000:.2f}k/s" if v >= 1000 else f"{v:.0f}/s"
ours = q([r["result"]["calls_per_s"] for r in rows if r["kind"] == "ours"])
base = q([r["result"]["calls_per_s"] for r in rows if r["kind"] == "python"])
verdict = "met" if ours[0] >= base[0] else "missed"
print("| figure | ours | baseline (same run) | ratio | target | verdict |")
print("| --- | --- | --- | --- | --- | --- |")
print(f"| tool call through `mcp-client`, stdio | {calls} sequential `echo` calls to a Python-SDK server through mcp-client: {fmt(ours[0])} (IQR {fmt(ours[1])}–{fmt(ours[2])}, n={ours[3]}) "
      f"| the same calls from the Python SDK's client: {fmt(base[0])} (IQR {fmt(base[1])}–{fmt(base[2])}, n={base[3]}) | {ours[0]/base[0]:.2f}× | ≥ 1× | {verdict} |")
PY
