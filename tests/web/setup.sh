#!/usr/bin/env bash
# Installs what the browser tests of `cordis web` drive, pinned, never into
# $HOME:
#
#   tests/web/setup.sh [DEST]     DEST defaults to target/web-peers
#
#   /usr/bin/chromium   Debian's `chromium` package (with a CJK font, so that
#                       the zh-CN screenshots show their text), installed
#                       with apt-get when missing (as root)
#   /usr/sbin/nginx,    Debian's `nginx` and `caddy` packages, the proxies the
#   /usr/bin/caddy      streams are tested behind, installed with apt-get
#                       when missing (as root); the tests start their own on
#                       a loopback port with a config in a temporary folder,
#                       and the packages' own services are not started
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

if [ ! -x /usr/sbin/nginx ] || [ ! -x /usr/bin/caddy ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/web/setup.sh: Debian's nginx and caddy are needed (the live streams are tested behind them); install them (apt-get install nginx caddy) or run as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Keep the package from starting its own service on port 80: a
  # policy-rc.d that refuses every start, for the length of the install,
  # unless the system has one already.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends nginx caddy >&2
  if [ -n "$policy" ]; then rm -f "$policy"; trap - EXIT; fi
fi
/usr/sbin/nginx -v 2>/dev/null
/usr/bin/caddy version >/dev/null

PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 bash "$here/../setup/venv.sh" "$here/requirements.txt" "$dest/python" playwright.sync_api
