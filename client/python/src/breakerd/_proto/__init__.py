"""Generated protobuf messages of breakerd/v1/breaker.proto (scripts/gen_proto.sh)."""
