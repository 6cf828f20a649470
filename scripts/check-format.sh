#!/usr/bin/env bash
# Fails if any C++ file is not clang-formatted (Google style, .clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cc' '*.h')
[ -z "$files" ] && exit 0
bad=$(for f in $files; do
  clang-format --dry-run -Werror "$f" > /dev/null 2>&1 || echo "$f"; done)
if [ -n "$bad" ]; then
  echo "not clang-formatted (run clang-format -i):"; echo "$bad"; exit 1
fi
