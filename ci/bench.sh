#!/bin/sh
# `make bench`: every benchmark, each printed beside its reference.
# Figures, not verdicts: targets are printed for the reader to compare.
set -eu
kv=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$(dirname "$0")/.."
echo "== engine"
"$kv" serve engine/bench/engine_bench.lua
echo "== bindings"
"$kv" serve bindings/bench/compare.lua
for b in fixtures/bench/*.sh; do
  [ -f "$b" ] || continue
  echo "== $(basename "$b" .sh)"
  sh "$b" "$kv"
done
