#!/usr/bin/env bash
# Regenerates the checked-in gRPC stubs in breakerdv1/ from
# ../../proto/breakerd/v1/breaker.proto.
#
# Usage: ./generate.sh [OUT_DIR]
#   OUT_DIR defaults to this folder; the stubs land in OUT_DIR/breakerdv1/.
#   (test.sh passes a temporary directory and diffs it with the checked-in copy.)
#
# The protoc plugins are installed with `go install` at pinned versions into
# .bin/ (gitignored). protoc itself is the system one (Debian's protobuf-compiler).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
proto_root="$here/../../proto"
bin="$here/.bin"

command -v protoc >/dev/null || { echo "generate.sh: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }

install_plugin() { # name module-path version
  local stamp="$bin/.$1-$3"
  if [[ ! -x "$bin/$1" || ! -e "$stamp" ]]; then
    GOBIN="$bin" GOFLAGS=-mod=mod go install "$2@$3"
    rm -f "$bin/.$1-"*; touch "$stamp"
  fi
}
mkdir -p "$bin" "$out"
install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

PATH="$bin:$PATH" protoc \
  -I "$proto_root" \
  --go_out="$out" --go_opt=module=github.com/breakerd/breakerd/client/go \
  --go-grpc_out="$out" --go-grpc_opt=module=github.com/breakerd/breakerd/client/go \
  breakerd/v1/breaker.proto
