# Sourced by each peer's run.sh: parses `[--smoke] OUT.json` into $smoke
# (0/1) and $out (absolute), then changes to the calling script's folder.
smoke=0
if [[ "${1:-}" == "--smoke" ]]; then smoke=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--smoke] OUT.json" >&2
  exit 2
fi
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$(dirname "$0")"
