#!/usr/bin/env bash
# Makes sure the PostgreSQL server programs (initdb, pg_ctl, postgres) and
# PgBouncer are on this machine, for the tests that start servers of their
# own (the session suite's PostgreSQL and store-contract tests). Installs
# Debian's `postgresql` and `pgbouncer` packages when they are missing; the
# tests never use a server they did not start.
set -euo pipefail
have_pg=0
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
  have_pg=1
fi
have_bouncer=0
if [ -x /usr/sbin/pgbouncer ]; then
  have_bouncer=1
fi
if [ "$have_pg" = 1 ] && [ "$have_bouncer" = 1 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL's server programs or PgBouncer are missing; install Debian's postgresql and pgbouncer packages (as root: apt-get install -y postgresql pgbouncer)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends postgresql pgbouncer >&2
