#!/usr/bin/env bash
# Installs what the browser tests of `cordis web` drive, pinned, never into
# $HOME:
#
#   tests/web/setup.sh [DEST]     DEST defaults to target/web-peers
#
#   /usr/bin/chromium   Debian's `chromium` package (with a CJK font, so that
#                       the zh-CN screenshots show their text), installed
#                       with apt-get when missing (as root)
#   DEST/python/        a virtualenv with Playwright for Python, pinned with
#                       its dependencies in requirements.txt. Playwright is
#                       pointed at the system browser; it never downloads one.
#
# It does nothing when everything is there (tests/setup/venv.sh keeps a
# stamp of the pinned file's hash), and holds a lock so parallel tests
# install once. Any failure is fatal: the tests do not skip.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/web-peers}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
exec 9>"$dest/.lock"
flock 9

if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi 'wenquanyi\|noto sans cjk'; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/web/setup.sh: Debian's chromium and fonts-wqy-microhei are needed; install them (apt-get install chromium fonts-wqy-microhei) or run as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium fonts-wqy-microhei >&2
fi
/usr/bin/chromium --version >/dev/null

PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 bash "$here/../setup/venv.sh" "$here/requirements.txt" "$dest/python" playwright.sync_api
