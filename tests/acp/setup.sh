#!/usr/bin/env bash
# Installs the ACP client the tests of `cordis acp` drive, pinned, into a
# folder inside target/ (never globally, never into $HOME):
#
#   tests/acp/setup.sh [DEST]     DEST defaults to target/acp-peers
#
#   DEST/python/   a virtualenv with the official Python SDK
#                  (`agent-client-protocol`, pinned with its dependencies
#                  in requirements.txt)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/acp-peers}"
mkdir -p "$dest"
bash "$here/../setup/venv.sh" "$here/requirements.txt" "$dest/python" acp
