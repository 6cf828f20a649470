#!/usr/bin/env bash
# Sanitizer runs of the whole test suite, and the clang -Wthread-safety build.
#
#   scripts/sanitize.sh [asan|tsan|thread-safety|all]     (default: all)
#
# asan           clang, Debug, -DBREAKERD_ASAN=ON (ASan + UBSan, LeakSanitizer
#                on, no suppressions): every GoogleTest
#                binary, then every ctest test except the labels client,
#                bench, deploy and soak. The end-to-end tests start the
#                ASan-built breakerd, which inherits the options below.
# tsan           clang, RelWithDebInfo, -DBREAKERD_TSAN=ON: the same tests,
#                the end-to-end ones against a TSan-built breakerd, with
#                halt_on_error=1 and the suppressions of tests/tsan.supp
#                (read it: Debian's gRPC, protobuf and Abseil are not
#                instrumented, and what that costs).
# thread-safety  clang, Debug, -DBREAKERD_THREAD_SAFETY=ON (-Wthread-safety
#                -Werror=thread-safety): every server library and breakerd.
#
# clang everywhere: it builds this tree in about two thirds of gcc's time.
# Build trees: build-asan-full, build-tsan-full, build-clang-full (under
# $SANITIZE_BUILD_ROOT, default the source tree). Every sanitizer report, of a
# test binary or of a breakerd it started, goes to <build>/sanitizer-logs
# (log_path): a run fails if a test fails or if any report was written, so a
# report from a breakerd that a test SIGKILLed is not lost. Exit status: 0 if
# every part passed. Each part prints its wall time.
#
# interop (grpcurl reading server reflection) is left out too: it tests
# what a foreign tool sees of the release binary, not breakerd's memory.
#
# Why soak is left out: its tests run for a minute at the machine's capacity
# and assert flat RSS and latency figures, which mean nothing under a
# sanitizer's allocator and 2-15x slowdown.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
root=${SANITIZE_BUILD_ROOT:-$src}
jobs=${SANITIZE_JOBS:-2}
exclude_labels='client|bench|deploy|soak|interop'

part=${1:-all}
case "$part" in
  asan | tsan | thread-safety | all) ;;
  *)
    echo "usage: $0 [asan|tsan|thread-safety|all]" >&2
    exit 2
    ;;
esac

# The GoogleTest binaries of a configured tree, except the client suite (its
# label is excluded) and soak (see above).
test_targets() {
  ninja -C "$1" -t targets all |
    sed -n 's/^\([A-Za-z0-9_]*_test\): \(CXX_EXECUTABLE_LINKER\|phony\).*/\1/p' |
    grep -v '^cmake_' | grep -vxE 'client_cpp_test|soak_test' | sort -u
}

# Fails (printing them) if any sanitizer report was written to $1.
check_reports() {
  local logs=$1 found=0 f
  for f in "$logs"/*; do
    [ -e "$f" ] || continue
    found=1
    echo "--- sanitizer report: $f"
    cat "$f"
  done
  if [ "$found" = 1 ]; then
    echo "FAILED: sanitizer reports in $logs"
    return 1
  fi
}

# Runs ctest on $1 (the environment carries the sanitizer options); tests
# of targets this script did not build (soak, client) are excluded by name.
# --timeout: a test process that a sanitizer halts leaves the breakerd and
# redis-server it started holding ctest's output pipe; without a timeout
# ctest waits for them (1500 s by default). The slowest test takes ~10 s.
# BREAKERD_RENDER=skip: the Prometheus e2e test does not draw the dashboard
# here (render.py is Python reading Prometheus; the release run draws it).
run_ctest() {
  BREAKERD_RENDER=skip ctest --test-dir "$1" --output-on-failure -j"$jobs" \
    --timeout 300 -LE "$exclude_labels" -E '_NOT_BUILT$'
}

run_asan() {
  local dir=$root/build-asan-full
  local logs=$dir/sanitizer-logs
  CC=clang CXX=clang++ cmake -S "$src" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Debug -DBREAKERD_ASAN=ON \
    -DBREAKERD_CLIENT_TESTS=OFF > /dev/null
  # shellcheck disable=SC2046
  cmake --build "$dir" -j"$jobs" --target breakerd $(test_targets "$dir")
  rm -rf "$logs" && mkdir -p "$logs"
  local rc=0
  ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:log_path=$logs/asan" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan" \
    run_ctest "$dir" || rc=$?
  check_reports "$logs" || rc=1
  return "$rc"
}

run_tsan() {
  local dir=$root/build-tsan-full
  local logs=$dir/sanitizer-logs
  CC=clang CXX=clang++ cmake -S "$src" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBREAKERD_TSAN=ON \
    -DBREAKERD_CLIENT_TESTS=OFF > /dev/null
  # shellcheck disable=SC2046
  cmake --build "$dir" -j"$jobs" --target breakerd $(test_targets "$dir")
  rm -rf "$logs" && mkdir -p "$logs"
  local rc=0
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$src/tests/tsan.supp:log_path=$logs/tsan" \
    run_ctest "$dir" || rc=$?
  check_reports "$logs" || rc=1
  return "$rc"
}

run_thread_safety() {
  local dir=$root/build-clang-full
  CC=clang CXX=clang++ cmake -S "$src" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Debug -DBREAKERD_THREAD_SAFETY=ON \
    -DBREAKERD_CLIENT_TESTS=OFF > /dev/null
  cmake --build "$dir" -j"$jobs" --target breakerd_engine breakerd_config \
    breakerd_state breakerd_log breakerd_metrics breakerd_fleet \
    breakerd_service breakerd
}

status=0
summary=()
timed() {
  local name=$1 fn=$2 t0 rc
  t0=$(date +%s)
  echo "=== sanitize: $name"
  set +e
  (set -e; "$fn")
  rc=$?
  set -e
  local line
  line="$name: $([ "$rc" = 0 ] && echo passed || echo "FAILED ($rc)") in $(($(date +%s) - t0)) s"
  echo "=== sanitize: $line"
  summary+=("$line")
  [ "$rc" = 0 ] || status=1
}

case "$part" in
  asan) timed asan run_asan ;;
  tsan) timed tsan run_tsan ;;
  thread-safety) timed thread-safety run_thread_safety ;;
  all)
    timed thread-safety run_thread_safety
    timed asan run_asan
    timed tsan run_tsan
    ;;
esac
printf '=== sanitize summary\n'
printf '  %s\n' "${summary[@]}"
exit "$status"
