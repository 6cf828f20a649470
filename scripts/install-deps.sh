#!/usr/bin/env bash
# Installs what breakerd needs to build and test on Debian 12 (as root).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
  g++ cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev prometheus-cpp-dev libcivetweb-dev libyaml-cpp-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libhiredis-dev grpc-proto \
  redis-server stunnel4 openssl faketime prometheus yamllint python3-yaml python3-venv curl ca-certificates
