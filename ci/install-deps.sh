#!/usr/bin/env bash
# Installs the Debian packages kvengine builds, tests and benchmarks with
# (python3-venv: the dynamo and smg targets' virtualenvs, whose packages come
# from PyPI through pip; openssl and iproute2: the cluster target's
# certificates and its bridge).
# Safe to run again: apt-get skips what is already there. Uses sudo only when not root.
set -euo pipefail

packages=(
  build-essential pkg-config
  liblua5.4-dev lua5.4 lua-cjson lua-yaml
  libuv1-dev libzmq3-dev libhiredis-dev libcurl4-openssl-dev
  libmsgpack-dev libssl-dev libhttp-parser-dev
  redis-server redis-tools
  python3 python3-zmq python3-msgpack python3-venv
  libxml2-utils clang libclang-rt-14-dev clang-format cppcheck valgrind
  wrk hyperfine
  openssl iproute2
  nftables # kube-proxy of the cluster target (its nftables mode runs nft)
)

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
