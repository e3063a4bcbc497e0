#!/usr/bin/env bash
# Runs every benchmark and prints one table of ratios against baselines
# measured in the same run (see the README's "Figures" section).
#
#   bench/run.sh            the full run (about 10 minutes on 2 cores)
#   bench/run.sh --quick    fewer and shorter samples, to try it out
#
# stdout gets only the table (also written to
# target/release/bench-scratch/figures.md); progress and criterion's own
# report go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: bench/run.sh [--quick]" >&2; exit 2 ;;
esac

# What is measured: the commit checked out now and any files changed on top
# of it (others may commit while the benchmarks run).
CORDIS_BENCH_COMMIT="$(git rev-parse --short HEAD)"
changed="$(git status --porcelain --untracked-files=no | cut -c4- | paste -sd, -)"
[ -z "$changed" ] || CORDIS_BENCH_COMMIT="$CORDIS_BENCH_COMMIT with uncommitted changes to $changed"
export CORDIS_BENCH_COMMIT

# The binaries and plugin libraries the figures load, optimised.
cargo build --release --workspace >&2

# In-process figures. Old samples are removed first, so the table can only
# show figures measured by this run.
rm -rf target/criterion/tool_call target/criterion/service_call target/criterion/durable_append target/criterion/replay target/criterion/resume target/criterion/store_append target/criterion/store_replay target/criterion/pg_append target/criterion/pg_append8 target/criterion/pg_replay
CORDIS_BENCH_QUICK=$quick cargo bench -p cordis-bench --features criterion --bench figures >&2

# The web app's figures, in headless Chromium (tests/web/setup.sh installs
# the browser and Playwright); their rows join the table below.
bash tests/web/setup.sh target/web-peers >&2
web_rows=target/release/bench-scratch/web-rows.md
mkdir -p target/release/bench-scratch
rm -f "$web_rows"
web_runs=30
[ "$quick" = 1 ] && web_runs=3
target/web-peers/python/bin/python bench/web.py target/release/cordis target/release "$web_runs" --rows "$web_rows" >&2

# Whole-process figures, the reference oracle, and the table.
if [ "$quick" = 1 ]; then
  ./target/release/cordis-bench --runs 10 --rss-runs 3 --reloads 10 --oracle-calls 2000 --oracle-runs 1 --rows "$web_rows"
else
  ./target/release/cordis-bench --rows "$web_rows"
fi
echo "bench/run.sh: the whole run took $SECONDS s" >&2
