#!/usr/bin/env bash
# Installs a pinned Python virtualenv into a folder of target/, for the
# peers the tests and benchmarks drive (never globally, never into $HOME):
#
#   tests/setup/venv.sh REQUIREMENTS DEST MODULE
#
# DEST becomes a virtualenv holding exactly what REQUIREMENTS pins; MODULE
# is a module that must import afterwards. A stamp of the requirements'
# hash (DEST.stamp) makes a second run a no-op, and a lock (DEST.lock)
# makes parallel runs wait for one install. Prints nothing on success but
# pip's errors. The npm counterpart is npm-tree.sh beside this file.
set -euo pipefail
[ "$#" -eq 3 ] || { echo "usage: venv.sh REQUIREMENTS DEST MODULE" >&2; exit 2; }
requirements="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
mkdir -p "$(dirname "$2")"
dest="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
module="$3"
exec 9>"$dest.lock"
flock 9

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ -f "$dest.stamp" ] && [ "$(cat "$dest.stamp")" = "$want" ] && [ -x "$dest/bin/python" ]; then
  exit 0
fi
rm -f "$dest.stamp"
command -v python3 >/dev/null || { echo "venv: python3 not found (install Python 3 with its venv module)" >&2; exit 1; }
rm -rf "$dest"
python3 -m venv "$dest" || { echo "venv: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
"$dest/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$requirements" >&2
"$dest/bin/python" -c "import $module" >&2
echo "$want" > "$dest.stamp"
