#!/usr/bin/env bash
# The whole test suite: release build, then every test (unit and
# end-to-end against the real binary) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2 "$@"
