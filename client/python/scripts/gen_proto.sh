#!/usr/bin/env bash
# Regenerates the checked-in protobuf module from proto/breakerd/v1/breaker.proto
#   scripts/gen_proto.sh          rewrite src/breakerd/_proto/breaker_pb2.{py,pyi}
#   scripts/gen_proto.sh --check  exit 1 if the checked-in files are stale
#
# Uses protoc (Debian's 3.21 at /usr/bin/protoc, or $PROTOC): its gencode has
# no runtime version gate, so it loads on every protobuf runtime from 4.21 on
# (Python 3.9+), where newer protoc releases would demand an equally new
# runtime. Only messages are generated: the client builds its RPC callables
# from the service descriptors, so no *_pb2_grpc.py is needed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
proto_root=$(cd "$here/../../proto" && pwd)
dest=$here/src/breakerd/_proto
protoc=${PROTOC:-protoc}

work=$(mktemp -d "${TMPDIR:-/tmp}/breakerd-py-gen.XXXXXX")
trap 'rm -rf "$work"' EXIT

includes=(-I "$proto_root")
[[ -f /usr/include/google/protobuf/duration.proto ]] && includes+=(-I /usr/include)

"$protoc" "${includes[@]}" --python_out="$work" --pyi_out="$work" breakerd/v1/breaker.proto

# The file keeps its registered name (breakerd/v1/breaker.proto) but lives at
# breakerd._proto.breaker_pb2: give its classes that module name.
mkdir -p "$work/out"
sed "s/'breakerd\.v1\.breaker_pb2'/'breakerd._proto.breaker_pb2'/" \
  "$work/breakerd/v1/breaker_pb2.py" > "$work/out/breaker_pb2.py"
grep -q "'breakerd._proto.breaker_pb2'" "$work/out/breaker_pb2.py" || {
  echo "gen_proto.sh: generated module name not found; protoc output changed shape" >&2
  exit 1
}
cp "$work/breakerd/v1/breaker_pb2.pyi" "$work/out/breaker_pb2.pyi"

if [[ ${1:-} == --check ]]; then
  for f in breaker_pb2.py breaker_pb2.pyi; do
    if ! cmp -s "$work/out/$f" "$dest/$f"; then
      echo "gen_proto.sh: src/breakerd/_proto/$f is stale (or was made by another protoc than" \
        "$("$protoc" --version), e.g. Debian's 3.21.12); run client/python/scripts/gen_proto.sh" >&2
      exit 1
    fi
  done
  echo "generated stubs are up to date"
else
  cp "$work/out/breaker_pb2.py" "$work/out/breaker_pb2.pyi" "$dest/"
  echo "wrote $dest/breaker_pb2.py and .pyi"
fi
