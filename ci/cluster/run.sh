#!/bin/sh
# The body of `make e2e-kvcache-cluster` (docs/cluster-target.md): the
# cluster target's cluster brought up outside the suite
# (fixtures/cluster/up.lua: control plane, node, Kthena's Helm install),
# the suite run against it one file at a time (the files share the install,
# as on kind), then the cluster stopped by its pid whatever happened (a
# failing suite, Ctrl-C, a signal), which removes everything it made.
# Exits with the suite's status; 3 when the machine cannot run the cluster
# (no root, no network namespaces, binaries missing: up.lua says which).
#
# Settings: KVENGINE (build/kvengine), SUITE (scenarios/*.lua), JUNIT,
# CLUSTER_DIR (the cluster's folder, kept; default a temporary one,
# removed), KVENGINE_ARGS (more arguments for the suite's run), RECORD (a
# file to write the suite's wall time to, which make bench shows),
# KVENGINE_TIME_SCALE (4) and TIMEOUT (300 s per test or hook): as on kind,
# a stack here is Deployments applied, scheduled, started by the node and
# found by the router through the API server, which takes tens of seconds
# where a local stack takes one, so the engine's waits and its default 30 s
# per hook would fail a healthy bring-up.
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
kvengine=${KVENGINE:-"$repo/build/kvengine"}
suite=${SUITE:-scenarios/*.lua}
export KVENGINE_TIME_SCALE="${KVENGINE_TIME_SCALE:-4}"
say() { printf 'ci/cluster/run.sh: %s\n' "$*" >&2; }

work=$(mktemp -d)
state="$work/state.json"
up_log="$work/up.log"
pid=""

stop() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    say "stopping the cluster (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    # kube-proxy's nftables table, should its owner script have been cut short
    proxy="${KVENGINE_CLUSTER_BIN:-$repo/build/cluster/bin}/kube-proxy"
    [ -x "$proxy" ] && "$proxy" --cleanup --proxy-mode nftables >/dev/null 2>&1
  fi
  pid=""
  rm -rf "$work"
}
trap 'stop' EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

set -- serve "$repo/fixtures/cluster/up.lua" --state "$state"
[ -n "${CLUSTER_DIR:-}" ] && set -- "$@" --dir "$CLUSTER_DIR"
start=$(date +%s)
"$kvengine" "$@" >"$up_log" 2>&1 &
pid=$!
say "bringing the cluster up (pid $pid, log $up_log)"
while [ ! -f "$state" ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    code=0
    wait "$pid" || code=$?
    pid=""
    cat "$up_log" >&2
    say "the cluster did not come up (exit $code)"
    exit "$code"
  fi
  sleep 1
done
say "cluster up in $(($(date +%s) - start)) s"
sed 's/^/  /' "$up_log" >&2

code=0
start=$(date +%s)
# shellcheck disable=SC2086 # SUITE and KVENGINE_ARGS are word lists
KVENGINE_CLUSTER_STATE="$state" "$kvengine" --target cluster -j 1 --timeout "${TIMEOUT:-300}" \
  ${JUNIT:+--junit "$JUNIT"} ${KVENGINE_ARGS:-} $suite || code=$?
if [ -n "${RECORD:-}" ]; then
  mkdir -p "$(dirname "$RECORD")"
  printf '%s s for %s on %s (exit %s)\n' "$(($(date +%s) - start))" "$suite" "$(date '+%F %H:%M')" "$code" \
    >"$RECORD"
fi
exit "$code"
