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
echo "== suite"
for j in 1 2; do
  start=$(date +%s.%N)
  "$kv" -j "$j" --no-color 'scenarios/*.lua' >/dev/null 2>&1 || echo "(the suite failed with -j $j)"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v j="$j" \
    'BEGIN { printf "whole suite, -j %d                        %8.1f s   target < 60 s on 2 cores\n", j, e - s }'
done
