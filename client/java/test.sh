#!/usr/bin/env bash
# Builds the Java client and runs its tests against the real breakerd.
#
#   BREAKERD_BIN=/path/to/breakerd client/java/test.sh
#
# Maven downloads the dependencies and plugins (Maven Central) into the local
# repository (~/.m2/repository by default; set BREAKERD_M2_REPO to use another
# one), generates the breakerd.v1 stubs from ../../proto into target/ with
# protoc and protoc-gen-grpc-java (also from Maven Central), compiles the
# client and its example, and runs the JUnit 5 suite, which starts breakerd
# as a child process. Exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if [[ -z "${BREAKERD_BIN:-}" ]]; then
  echo "test.sh: BREAKERD_BIN is not set (the breakerd binary the tests start)" >&2
  exit 2
fi
if [[ ! -x "$BREAKERD_BIN" || -d "$BREAKERD_BIN" ]]; then
  echo "test.sh: BREAKERD_BIN=$BREAKERD_BIN is not an executable file" >&2
  exit 2
fi
BREAKERD_BIN="$(cd "$(dirname "$BREAKERD_BIN")" && pwd)/$(basename "$BREAKERD_BIN")"
export BREAKERD_BIN

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null; then
    echo "test.sh: $tool not found (needs Java 17+ and Maven 3.8+)" >&2
    exit 2
  fi
done

mvn_args=(-B -q -Dstyle.color=never -Dbreakerd.bin="$BREAKERD_BIN")
if [[ -n "${BREAKERD_M2_REPO:-}" ]]; then
  mvn_args+=(-Dmaven.repo.local="$BREAKERD_M2_REPO")
fi

rm -rf target/surefire-reports
status=0
# Maven 3.8 writes stray colour resets even in batch mode; drop them.
mvn "${mvn_args[@]}" verify 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' || status=$?

# A one-line summary from Surefire's reports (-q hides Surefire's own).
shopt -s nullglob
reports=(target/surefire-reports/TEST-*.xml)
if ((${#reports[@]} > 0)); then
  read -r tests failures errors skipped < <(
    grep -ho '<testsuite [^>]*>' "${reports[@]}" | awk '
      { for (i = 1; i <= NF; i++) {
          if (match($i, /^(tests|failures|errors|skipped)="[0-9]+"/)) {
            split($i, kv, "\""); key = substr($i, 1, index($i, "=") - 1); sum[key] += kv[2]
          } } }
      END { printf "%d %d %d %d\n", sum["tests"], sum["failures"], sum["errors"], sum["skipped"] }')
  echo "Tests run: $tests, Failures: $failures, Errors: $errors, Skipped: $skipped"
  echo "java: $((tests - failures - errors - skipped)) passed, $((failures + errors)) failed, $skipped skipped"
  if ((tests == 0)); then
    echo "test.sh: no test ran" >&2
    status=1
  fi
elif ((status == 0)); then
  echo "test.sh: no Surefire reports were written" >&2
  status=1
fi
exit "$status"
