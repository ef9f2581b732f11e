#!/bin/sh
# `make bench`: every benchmark, each printed beside its reference.
# Figures, not verdicts: targets are printed for the reader to compare.
set -eu
kv=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$(dirname "$0")/.."

# The benchmarks' own references, installed when missing: make test needs
# neither.  nginx is only ever run by the benchmark itself (bindings/bench/
# nginx.lua), as a child process on 127.0.0.1.
missing=""
command -v wrk >/dev/null || missing="$missing wrk"
[ -x /usr/sbin/nginx ] || missing="$missing nginx"
if [ -n "$missing" ]; then
  echo "== installing$missing"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# Machine-readable results (histograms as JSON) go here.
KVENGINE_BENCH_OUT=${KVENGINE_BENCH_OUT:-$PWD/build/bench}
export KVENGINE_BENCH_OUT
mkdir -p "$KVENGINE_BENCH_OUT"
echo "(2 shared cores: figures are noisy; the http rows are medians of 5 rounds)"
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
