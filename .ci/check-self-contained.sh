#!/usr/bin/env bash
# Fails when a tracked file refers to something outside the repository: the
# reading material kept beside a checkout (a `shared/` folder) or design
# notes by section number. Tests, scripts and docs stand on the repository's
# own files and on peers its setup scripts install.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\.\./shared|shared/(oracle|reference|fixtures|seeds|hooks)|DESIGN(\.md| §)'
if hits="$(git ls-files -z | grep -zv '^\.ci/check-self-contained\.sh$' | xargs -0 grep -nIE "$pattern" --)"; then
  echo "files refer to paths outside the repository:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "self-contained: no tracked file refers outside the repository"
