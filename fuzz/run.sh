#!/usr/bin/env bash
# Builds breakerd's libFuzzer targets with clang and runs them.
#
#   fuzz/run.sh [--smoke] [BUILD_DIR]
#
# BUILD_DIR (default: build-fuzz in the repository) is configured, if it has
# no CMakeCache.txt yet, with
#
#   CC=clang CXX=clang++ cmake -S <repo> -B BUILD_DIR -G Ninja \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBREAKERD_FUZZ=ON \
#     -DBREAKERD_CLIENT_TESTS=OFF
#
# and the four targets are built in it (target breakerd_fuzzers).
#
# --smoke      each target runs 15 s; the script fails if any crashes.
# (default)    each target runs FUZZ_SECONDS (default 600) seconds; the
#              script prints executions, exec/s and coverage per target and
#              the total executions, and fails if any target crashed.
#
# Every target fuzzes a copy of its seed corpus (fuzz/corpus/<target>) in a
# work directory: the repository's corpus is never written to. Crash,
# timeout and OOM inputs land in <work>/<target>/.
#
# Environment:
#   FUZZ_SECONDS              seconds per target (default 600; 15 with --smoke)
#   FUZZ_SECONDS_<target>     per-target override, e.g. FUZZ_SECONDS_service_fuzz
#   FUZZ_TARGETS              targets to run (default: all four)
#   FUZZ_PARALLEL             targets run at once (default 1)
#   FUZZ_WORK                 work directory (default: a new /tmp/breakerd-fuzz.*)
#   FUZZ_NO_BUILD=1           use BUILD_DIR as it is
#   FUZZ_JOBS                 build parallelism (default 2)
#   BREAKERD_FUZZ_STRICT=1    known findings abort again (see fuzz/README.md)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/.." && pwd)"

smoke=0
if [[ "${1:-}" == "--smoke" ]]; then
  smoke=1
  shift
fi
if [[ $# -gt 1 || "${1:-}" == -* ]]; then
  echo "usage: fuzz/run.sh [--smoke] [BUILD_DIR]" >&2
  exit 2
fi
build="${1:-${repo}/build-fuzz}"
mkdir -p "${build}"
build="$(cd "${build}" && pwd)"

targets=(${FUZZ_TARGETS:-config_fuzz classify_fuzz state_file_fuzz service_fuzz})
if [[ ${smoke} -eq 1 ]]; then
  default_seconds=15
else
  default_seconds="${FUZZ_SECONDS:-600}"
fi
parallel="${FUZZ_PARALLEL:-1}"

# --- build -------------------------------------------------------------------
if [[ "${FUZZ_NO_BUILD:-0}" != "1" ]]; then
  if [[ ! -f "${build}/CMakeCache.txt" ]]; then
    CC=clang CXX=clang++ cmake -S "${repo}" -B "${build}" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBREAKERD_FUZZ=ON \
      -DBREAKERD_CLIENT_TESTS=OFF
  fi
  cmake --build "${build}" -j "${FUZZ_JOBS:-2}" --target "${targets[@]}"
fi
for t in "${targets[@]}"; do
  if [[ ! -x "${build}/${t}" ]]; then
    echo "fuzz/run.sh: ${build}/${t} is missing" >&2
    exit 1
  fi
done

# --- run ---------------------------------------------------------------------
work="${FUZZ_WORK:-$(mktemp -d /tmp/breakerd-fuzz.XXXXXX)}"
mkdir -p "${work}"
echo "fuzz/run.sh: work directory ${work}"

# Options every target gets, then each target's own.
common=(-print_final_stats=1 -timeout=30 -rss_limit_mb=4096)
target_options() {
  case "$1" in
    config_fuzz) echo "-dict=${here}/dict/config_fuzz.dict -max_len=4096" ;;
    state_file_fuzz) echo "-dict=${here}/dict/state_file_fuzz.dict" ;;
    # gRPC's threads allocate and free across inputs, so libFuzzer's
    # per-input leak check would run LSan on nearly every input (slow, and
    # it reports gRPC's caches).
    service_fuzz) echo "-detect_leaks=0" ;;
    *) echo "" ;;
  esac
}

run_one() {
  local t="$1"
  local seconds_var="FUZZ_SECONDS_${t}"
  local seconds="${!seconds_var:-${default_seconds}}"
  local dir="${work}/${t}"
  rm -rf "${dir}"
  mkdir -p "${dir}/corpus"
  cp "${here}/corpus/${t}/"* "${dir}/corpus/" 2>/dev/null || true
  local cmd=("${build}/${t}" "${common[@]}" $(target_options "${t}")
    -max_total_time="${seconds}" -artifact_prefix="${dir}/"
    "${dir}/corpus")
  echo "${cmd[*]}" > "${dir}/command"
  local rc=0
  (cd "${dir}" && "${cmd[@]}") > "${dir}/log" 2>&1 || rc=$?
  echo "${rc}" > "${dir}/rc"
}

running=0
for t in "${targets[@]}"; do
  seconds_var="FUZZ_SECONDS_${t}"
  echo "fuzz/run.sh: ${t} for ${!seconds_var:-${default_seconds}}s"
  run_one "${t}" &
  running=$((running + 1))
  if [[ ${running} -ge ${parallel} ]]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

# --- report ------------------------------------------------------------------
stat() {  # stat <log> <name>: a value of libFuzzer's final stats
  sed -n "s/^stat::$2: *//p" "$1" | tail -1
}
summary="${work}/summary.md"
{
  echo "| target | seconds | executions | exec/s | cov | ft | corpus | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} > "${summary}"
total=0
failed=0
for t in "${targets[@]}"; do
  dir="${work}/${t}"
  log="${dir}/log"
  execs="$(stat "${log}" number_of_executed_units)"
  rate="$(stat "${log}" average_exec_per_sec)"
  last="$(grep -E '^#[0-9]+' "${log}" | tail -1 || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "${last}")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "${last}")"
  corp="$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<< "${last}")"
  crashes="$(find "${dir}" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \
       -o -name 'leak-*' \) | wc -l)"
  rc="$(cat "${dir}/rc")"
  seconds_var="FUZZ_SECONDS_${t}"
  echo "| ${t} | ${!seconds_var:-${default_seconds}} | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${crashes} |" >> "${summary}"
  total=$((total + ${execs:-0}))
  if [[ "${rc}" != "0" || "${crashes}" != "0" ]]; then
    failed=1
    echo "fuzz/run.sh: ${t} FAILED (exit ${rc}, ${crashes} crash inputs); see ${log}" >&2
    grep -E -A12 'invariant violated|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error' \
      "${log}" | head -40 >&2 || true
  fi
done
echo "| total | | ${total} | | | | | |" >> "${summary}"
cat "${summary}"
echo "fuzz/run.sh: total executions ${total}; logs and crash inputs in ${work}"
exit "${failed}"
