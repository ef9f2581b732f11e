#!/bin/sh
# The body of `make e2e-kvcache-kind`: the cluster created if needed
# (ci/kind/up.sh), the suite run against it one file at a time under one run
# id, the cluster's logs exported when the suite failed, the run's leftover
# namespaces deleted (only this run's: other runs may share the cluster),
# and the cluster deleted afterwards when KIND_DELETE=1. Exits with the
# suite's status.
#
#   KVENGINE (build/kvengine), SUITE ('scenarios/*.lua'; several paths or
#   globs separated by spaces), JUNIT (build/e2e-kvcache-kind.xml), ARTIFACTS
#   (artifacts), KIND_CLUSTER, KIND_DELETE (0), KVENGINE_TIME_SCALE (4: a
#   cluster answers slower than loopback), TIMEOUT (300 s per test or hook),
#   KVENGINE_KIND_EVENTS (bridge | publisher, docs/kind.md), KVENGINE_KIND_RUN
#   (the run id; made up when unset), and ci/kind/up.sh's.
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
kvengine=${KVENGINE:-$repo/build/kvengine}
suite=${SUITE:-scenarios/*.lua}
junit=${JUNIT:-$repo/build/e2e-kvcache-kind.xml}
artifacts=${ARTIFACTS:-$repo/artifacts}
cluster=${KIND_CLUSTER:-kvengine}
export KIND_CLUSTER="$cluster"
export KVENGINE_KIND_CLUSTER="$cluster"
export KVENGINE_TIME_SCALE="${KVENGINE_TIME_SCALE:-4}"
run=${KVENGINE_KIND_RUN:-run-$(date -u +%Y%m%d%H%M%S)-$$}
export KVENGINE_KIND_RUN="$run"

sh "$repo/ci/kind/up.sh"

status=0
set -f # the suite's globs are for kvengine to expand
# shellcheck disable=SC2086 # one path or glob per word
"$kvengine" --target kind -j 1 --timeout "${TIMEOUT:-300}" --junit "$junit" --artifacts "$artifacts" \
  $suite || status=$?
set +f

if [ "$status" -ne 0 ]; then
  kind export logs --name "$cluster" "$artifacts/kind-logs" || true
fi
"$kvengine" serve "$repo/ci/kind/cleanup.lua" --context "kind-$cluster" --run "$run" || true
if [ "${KIND_DELETE:-0}" = 1 ]; then
  sh "$repo/ci/kind/down.sh" || true
fi
exit "$status"
