#!/usr/bin/env bash
# Makes sure the PostgreSQL server programs (initdb, pg_ctl, postgres) are on
# this machine, for the tests that start a server of their own
# (the session suite's postgres tests). Installs Debian's `postgresql` package when they are
# missing; the tests never use a server they did not start.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL's server programs are missing; install Debian's postgresql package (as root: apt-get install -y postgresql)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends postgresql >&2
