#!/usr/bin/env bash
# Runs the C++ client's checks: clang-format, then the client built on its
# own (client/cpp with BREAKERD_CLIENT_CPP_TESTS) and its test suite under
# ctest (one test per process, as breakerd's tree runs client_cpp_test)
# against a real breakerd.
#
# Usage: BREAKERD_BIN=/path/to/breakerd client/cpp/test.sh [ctest args...]
#   BREAKERD_CPP_BUILD   build tree (default: build-client-cpp at the root of
#                        the breakerd tree; a first build takes minutes)
#   BREAKERD_TSAN=1      a ThreadSanitizer build instead (default tree
#                        build-client-cpp-tsan), with tests/tsan.supp
#   JOBS                 build jobs (default 1)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [[ -z "${BREAKERD_BIN:-}" ]]; then
  echo "test.sh: BREAKERD_BIN is not set (point it at the breakerd binary)" >&2
  exit 2
fi
if [[ ! -x "$BREAKERD_BIN" ]]; then
  echo "test.sh: BREAKERD_BIN=$BREAKERD_BIN is not an executable file" >&2
  exit 2
fi
BREAKERD_BIN="$(cd "$(dirname "$BREAKERD_BIN")" && pwd)/$(basename "$BREAKERD_BIN")"

echo "== clang-format"
mapfile -t sources < <(cd "$here" && find include src tests example \
  -name '*.h' -o -name '*.cc')
unformatted=()
for f in "${sources[@]}"; do
  if ! diff -q <(clang-format --style=file "$here/$f") "$here/$f" >/dev/null; then
    unformatted+=("$f")
  fi
done
if ((${#unformatted[@]})); then
  echo "test.sh: not clang-formatted: ${unformatted[*]}" >&2
  exit 1
fi

tsan=${BREAKERD_TSAN:-0}
if [[ $tsan == 1 ]]; then
  build=${BREAKERD_CPP_BUILD:-$root/build-client-cpp-tsan}
  export CC=${CC:-clang} CXX=${CXX:-clang++}
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
else
  build=${BREAKERD_CPP_BUILD:-$root/build-client-cpp}
fi

echo "== build ($build)"
cmake -S "$here" -B "$build" -G Ninja -DBREAKERD_CLIENT_CPP_TESTS=ON \
  -DBREAKERD_TSAN="$([[ $tsan == 1 ]] && echo ON || echo OFF)" \
  -DBREAKERD_BIN="$BREAKERD_BIN" >/dev/null
cmake --build "$build" -j"${JOBS:-1}"

echo "== ctest"
ctest --test-dir "$build" --output-on-failure --timeout 300 "$@"
