#!/usr/bin/env bash
# Installs a pinned npm tree into a folder of target/, for the peers the
# tests and benchmarks run (never globally, never into $HOME):
#
#   tests/setup/npm-tree.sh PINS DEST MARKER
#
# PINS is a folder holding package.json and package-lock.json; DEST/
# node_modules becomes exactly the lock file's tree (`npm ci`); MARKER is a
# path below DEST that must exist afterwards. A stamp of the pinned files'
# hash makes a second run a no-op, and a lock makes parallel runs wait for
# one install. Prints nothing on success but npm's errors.
set -euo pipefail
[ "$#" -eq 3 ] || { echo "usage: npm-tree.sh PINS DEST MARKER" >&2; exit 2; }
pins="$(cd "$1" && pwd)"
mkdir -p "$2"
dest="$(cd "$2" && pwd)"
marker="$dest/$3"
exec 9>"$dest/.lock"
flock 9

want="$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ] && [ -e "$marker" ]; then
  exit 0
fi
rm -f "$dest/.stamp"
command -v npm >/dev/null || { echo "npm-tree: npm not found (install Node.js 20 and npm)" >&2; exit 1; }
rm -rf "$dest/node_modules"
cp "$pins/package.json" "$pins/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
[ -e "$marker" ] || { echo "npm-tree: $marker missing after npm ci" >&2; exit 1; }
echo "$want" > "$dest/.stamp"
