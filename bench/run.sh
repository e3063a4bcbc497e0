#!/usr/bin/env bash
# Runs every benchmark and prints one table of ratios against baselines
# measured in the same run (see the README's "Figures" section).
#
#   bench/run.sh               the full run (15 to 20 minutes on 2 cores)
#   bench/run.sh --quick       fewer and shorter samples, to try it out
#   bench/run.sh --rust-only   leave out the figures whose peers need
#                              Python or npm: the reference oracle (npm),
#                              MCP over stdio (Python and npm), mcp-client
#                              (Python), the web app (Python, Chromium) and
#                              the token estimate against DeepSeek's
#                              tokenizer (Python);
#                              the PostgreSQL rows stay (Debian's postgresql,
#                              installed as the tests install it)
#   bench/run.sh --no-peers    leave out the Rust peers' rows (bench/peers.sh,
#                              which builds eavae/cordis-rs and dshbox/cordis-rs
#                              from CORDIS_PEER_CORDIS_RS and CORDIS_PEER_DSHBOX:
#                              a local copy of each, or `crates.io` for dshbox;
#                              without them it clones from GitHub)
#
# stdout gets only the table (also written to
# target/release/bench-scratch/figures.md); progress and criterion's own
# report go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
peers=1
rust_peers=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --rust-only) peers=0 ;;
    --no-peers) rust_peers=0 ;;
    *) echo "usage: bench/run.sh [--quick] [--rust-only] [--no-peers]" >&2; exit 2 ;;
  esac
done

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

# Figures measured against peers in Python or Node.js, each written as
# rows of the one table.
rows="target/release/bench-scratch/rows"
rm -rf "$rows"
mkdir -p "$rows"
extra=()
if [ "$peers" = 1 ]; then
  if [ "$quick" = 1 ]; then calls=200; runs=1; web_runs=3; else calls=1000; runs=5; web_runs=30; fi
  echo "bench/run.sh: MCP over stdio" >&2
  bash bench/mcp.sh "$calls" "$runs" > "$rows/mcp.md"
  echo "bench/run.sh: mcp-client" >&2
  bash bench/mcp_client.sh "$calls" "$runs" > "$rows/mcp-client.md"
  echo "bench/run.sh: cordis web" >&2
  bash tests/web/setup.sh target/web-peers >&2
  target/web-peers/python/bin/python bench/web.py target/release/cordis target/release "$web_runs" > "$rows/web.md"
  extra=(--rows "$rows/mcp.md" --rows "$rows/mcp-client.md" --rows "$rows/web.md")
else
  extra=(--oracle none --no-python)
fi

# `cordis acp` against `cordis run` and `session show` (the system's
# python3, no peer), in every mode.
echo "bench/run.sh: cordis acp" >&2
if [ "$quick" = 1 ]; then acp_runs=6; else acp_runs=20; fi
python3 bench/acp.py target/release/cordis target/release "$acp_runs" > "$rows/acp.md"
extra+=(--rows "$rows/acp.md")

# The Rust peers side by side: boot and reload (their own table goes to
# target/peers/peers.md; their rows join this one).
if [ "$rust_peers" = 1 ]; then
  echo "bench/run.sh: the Rust peers (bench/peers.sh)" >&2
  if [ "$quick" = 1 ]; then peer_runs=20; else peer_runs=30; fi
  bash bench/peers.sh --runs "$peer_runs" --reloads 20 --rows "$rows/peers.md" >&2
  extra+=(--rows "$rows/peers.md")
fi

# Whole-process figures, the reference oracle, and the table.
if [ "$quick" = 1 ]; then
  ./target/release/cordis-bench --runs 10 --rss-runs 3 --reloads 10 --oracle-calls 2000 --oracle-runs 1 "${extra[@]}"
else
  ./target/release/cordis-bench "${extra[@]}"
fi
echo "bench/run.sh: the whole run took $SECONDS s" >&2
