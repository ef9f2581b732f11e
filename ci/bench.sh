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
# The router decision table runs on Kthena's real router too, beside the
# stand-in, when the kthena target's programs build here (Go installed).
decisions_on=local
if command -v go >/dev/null && sh ci/kthena/build.sh >/dev/null 2>&1; then
  decisions_on=kthena
fi
# Benchmarks that are one Lua file each (its head comment says what it
# measures), then those with a script of their own.
for b in router_latency runtime_ingest router_decision router_sweep; do
  echo "== $b"
  target=local
  [ "$b" = router_decision ] && target=$decisions_on
  if command -v redis-server >/dev/null; then
    KVENGINE_TARGET=$target "$kv" serve "fixtures/bench/$b.lua"
  else
    echo "$b: redis-server not installed, skipped"
  fi
done
# The scale figures (docs/bench.md): the router at 3 to 1,000 pods (the
# real router beside the stand-in when it builds), the stack of each target
# at the same counts (a count whose stack cannot start says why on its row),
# then the growth report and build/bench/scale.html.
echo "== scale"
if command -v redis-server >/dev/null; then
  rm -f "$KVENGINE_BENCH_OUT"/scale-*.json # an earlier run's target must not join this one's report
  KVENGINE_TARGET=$decisions_on "$kv" serve fixtures/bench/router_decision.lua scale
  for target in local $( [ "$decisions_on" = kthena ] && echo kthena ); do
    KVENGINE_TARGET=$target "$kv" serve fixtures/bench/stack_scale.lua 3 64 256 1000
  done
  "$kv" serve fixtures/bench/scale_report.lua
else
  echo "scale: redis-server not installed, skipped"
fi
for b in fixtures/bench/*.sh; do
  echo "== $(basename "$b" .sh)"
  sh "$b" "$kv"
done
echo "== suite"
# Wall time with one worker and with the default (four per core, at most one
# per file: files mostly wait); then the five slowest files of the second run,
# each run again alone for its wall and CPU seconds (the engine's and every
# process its stack started, reaped by it).
junit=$(mktemp)
for j in 1 default; do
  set -- -j "$j"
  [ "$j" = default ] && set --
  start=$(date +%s.%N)
  "$kv" "$@" --no-color --junit "$junit" 'scenarios/*.lua' >/dev/null 2>&1 || echo "(the suite failed with -j $j)"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v j="$j" \
    'BEGIN { printf "whole suite, -j %-8s                %8.1f s   target < 15 s with the default -j on 2 cores\n", j, e - s }'
done
echo "five slowest files (with the default -j; then alone: wall, CPU = user + sys):"
n=$(xmllint --xpath 'count(//testsuite)' "$junit")
i=1
while [ "$i" -le "$n" ]; do
  printf '%s %s\n' "$(xmllint --xpath "string(//testsuite[$i]/@time)" "$junit")" \
    "$(xmllint --xpath "string(//testsuite[$i]/@name)" "$junit")"
  i=$((i + 1))
done | sort -rn | head -n 5 | while read -r t file; do
  /usr/bin/time -f "%e %U %S" -o "$junit.time" "$kv" -j 1 --no-color "$file" >/dev/null 2>&1 || true
  read -r wall user sys <"$junit.time"
  awk -v f="$file" -v t="$t" -v w="$wall" -v u="$user" -v s="$sys" \
    'BEGIN { printf "  %-36s %6.1f s in the suite   alone %6.1f s wall %6.1f s CPU\n", f, t, w, u + s }'
done
rm -f "$junit" "$junit.time"
