#!/bin/sh
# `make soak`: everything `make test` runs, SOAK_RUNS times in a row (20),
# to find the tests that fail now and then: the engine's suite over PATH...
# and, with Go on PATH, the kthena harness's Go tests (uncached). Every run goes to the end; the
# log and the artifacts of a failing run are kept in SOAK_DIR (build/soak),
# those of a passing one removed. Exits 1 when any run failed.
#
#   sh ci/soak.sh KVENGINE PATH...     (the Makefile passes $(TEST_PATHS))
set -u
kv=$1
shift
runs=${SOAK_RUNS:-20}
dir=${SOAK_DIR:-build/soak}
mkdir -p "$dir"
failed=0
go_tests() {
  command -v go >/dev/null 2>&1 || return 0
  (cd fixtures/kthena && GOTOOLCHAIN=local go test -count=1 ./...)
}
i=1
while [ "$i" -le "$runs" ]; do
  log="$dir/run-$i.log"
  start=$(date +%s)
  if "$kv" -j 2 --no-color --artifacts "$dir/artifacts-$i" "$@" >"$log" 2>&1 && go_tests >>"$log" 2>&1; then
    rm -rf "$log" "$dir/artifacts-$i"
    echo "soak: run $i of $runs passed ($(($(date +%s) - start))s)"
  else
    failed=$((failed + 1))
    echo "soak: run $i of $runs FAILED ($(($(date +%s) - start))s): log $log, artifacts $dir/artifacts-$i"
    grep -E '^  (FAIL|ERROR) ' "$log" || tail -5 "$log"
  fi
  i=$((i + 1))
done
if [ "$failed" -gt 0 ]; then
  echo "soak: $failed of $runs runs failed; their logs are in $dir"
  exit 1
fi
echo "soak: $runs of $runs runs passed"
