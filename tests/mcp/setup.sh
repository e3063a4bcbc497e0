#!/usr/bin/env bash
# Installs the MCP clients the tests of `cordis mcp` drive, pinned, into a
# folder inside target/ (never globally, never into $HOME):
#
#   tests/mcp/setup.sh [DEST]     DEST defaults to target/mcp-peers
#
#   DEST/python/   a virtualenv with the official Python SDK (`mcp`, pinned
#                  with its dependencies in requirements.txt)
#   DEST/node/     the official TypeScript SDK (@modelcontextprotocol/sdk,
#                  pinned with its dependencies in package-lock.json)
#
# It does nothing when DEST already holds what the pinned files name (a
# stamp records their hash), and holds a lock so parallel tests install once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/mcp-peers}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
exec 9>"$dest/.lock"
flock 9

want="$(cat "$here/requirements.txt" "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ] \
   && [ -x "$dest/python/bin/python" ] && [ -d "$dest/node/node_modules/@modelcontextprotocol/sdk" ]; then
  exit 0
fi
rm -f "$dest/.stamp"

# Python: a virtualenv of its own (also keeps pip off the system).
rm -rf "$dest/python"
python3 -m venv "$dest/python"
"$dest/python/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$here/requirements.txt" >&2

# Node: exactly the lock file's tree.
rm -rf "$dest/node"
mkdir -p "$dest/node"
cp "$here/package.json" "$here/package-lock.json" "$dest/node/"
(cd "$dest/node" && npm ci --no-audit --no-fund --loglevel=error >&2)

echo "$want" > "$dest/.stamp"
