#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60).
#
#   bash fuzz/run.sh [SECONDS]
#
# Installs cargo-fuzz when it is missing, builds the targets, and runs each
# one on its corpus folder fuzz/corpus/<target> (kept between runs, seeded
# from fuzz/seeds/<target>, reset when it grows past CORPUS_MAX_FILES files)
# with its dictionary from fuzz/dicts/. A crash, a failed check or an input
# slower than TIMEOUT seconds stops the script with a non-zero exit; the
# input that did it is saved under fuzz/artifacts/<target>/ and printed as
# a command that replays it.
#
# cargo-fuzz needs nightly-only compiler flags (-Z sanitizer=address and
# others); only a stable toolchain is installed, so RUSTC_BOOTSTRAP=1 lets
# stable rustc accept them. It is set for this script only.
set -euo pipefail

seconds="${1:-60}"
case "$seconds" in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")"
targets=(todo_arguments composition session_log harness_log mcp_stdio)
cargo_fuzz_version=0.13.2
corpus_max_files="${CORPUS_MAX_FILES:-20000}"
max_len="${MAX_LEN:-8192}"
timeout="${TIMEOUT:-30}"
export RUSTC_BOOTSTRAP=1

started=$SECONDS
# cargo-fuzz is installed inside the repository (fuzz/target/tools, which
# git ignores), never into ~/.cargo: nothing is cached outside the repo.
tools="$PWD/target/tools"
export PATH="$tools/bin:$PATH"
if ! "$tools/bin/cargo-fuzz" --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz $cargo_fuzz_version into $tools"
    cargo install cargo-fuzz --locked --version "$cargo_fuzz_version" --root "$tools"
fi
echo "fuzz: $("$tools/bin/cargo-fuzz" --version)"

echo "fuzz: building ${targets[*]}"
cargo fuzz build
built=$SECONDS

for target in "${targets[@]}"; do
    corpus="corpus/$target"
    if [ -d "$corpus" ] && [ "$(find "$corpus" -type f | wc -l)" -gt "$corpus_max_files" ]; then
        echo "fuzz: $corpus holds more than $corpus_max_files inputs; starting it again from the seeds"
        rm -rf "$corpus"
    fi
    mkdir -p "$corpus" "artifacts/$target"
    log="artifacts/$target/last-run.log"
    echo "fuzz: running $target for ${seconds}s (log: fuzz/$log)"
    status=0
    # mcp_stdio runs the server's own threads (a tokio runtime whose pool
    # outlives each input); LeakSanitizer counts a live pool thread's
    # per-thread storage as a leak, so leak checks are off for it. Memory
    # stays bounded by libFuzzer's -rss_limit_mb (2 GB) all the same.
    # libFuzzer's -detect_leaks=0 covers the runs; the sanitizer's own leak
    # check at process exit, when the pool's threads still hold their
    # storage, is switched off through ASAN_OPTIONS.
    extra=()
    asan_options="${ASAN_OPTIONS:-}"
    if [ "$target" = mcp_stdio ]; then
        extra=(-detect_leaks=0)
        asan_options="${asan_options:+$asan_options:}detect_leaks=0"
    fi
    # The first folder receives new inputs; the seeds are only read.
    ASAN_OPTIONS="$asan_options" cargo fuzz run "$target" "$corpus" "seeds/$target" -- \
        -max_total_time="$seconds" -max_len="$max_len" -timeout="$timeout" "${extra[@]}" \
        -dict="dicts/$target.dict" -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^(Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | sed "s/^/fuzz: $target: /" || true
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log" >&2
        echo "fuzz: $target failed (exit $status); the input is in fuzz/artifacts/$target/" >&2
        echo "fuzz: replay it with: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run $target artifacts/$target/<file>" >&2
        exit 1
    fi
    echo "fuzz: $target: no crash; corpus $(find "$corpus" -type f | wc -l) inputs"
done

echo "fuzz: done in $((SECONDS - started))s (install and build $((built - started))s)"
