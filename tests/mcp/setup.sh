#!/usr/bin/env bash
# Installs the MCP clients the tests of `cordis mcp` and `mcp-client`
# drive, pinned, into a folder inside target/ (never globally, never into
# $HOME):
#
#   tests/mcp/setup.sh [DEST]     DEST defaults to target/mcp-peers
#
#   DEST/python/   a virtualenv with the official Python SDK (`mcp`, pinned
#                  with its dependencies in requirements.txt)
#   DEST/node/     the official TypeScript SDK (@modelcontextprotocol/sdk,
#                  pinned with its dependencies in package-lock.json)
#
# Each half is installed by the shared helpers in tests/setup/, which do
# nothing when the pinned files have not changed and hold a lock so that
# parallel tests install once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/mcp-peers}"
mkdir -p "$dest"
bash "$here/../setup/venv.sh" "$here/requirements.txt" "$dest/python" mcp
bash "$here/../setup/npm-tree.sh" "$here" "$dest/node" node_modules/@modelcontextprotocol/sdk/package.json
