#!/usr/bin/env bash
# Installs the peer the benchmark compares against, the published TypeScript
# todo_write tool (@deepseek-ai/dsh-tool-todo) with the cordis Loader and
# Include plugin it boots through, pinned by package-lock.json:
#
#   bench/reference/setup.sh [DEST]     DEST defaults to target/reference-peer
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../../tests/setup/npm-tree.sh" "$here" "${1:-$here/../../target/reference-peer}" \
  node_modules/@deepseek-ai/dsh-tool-todo/package.json
