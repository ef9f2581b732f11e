#!/bin/sh
# Creates (or reuses) the Kind cluster of the kind target and installs what
# the suite needs, then waits for Kthena's router (docs/kind.md):
#
#   0. the tools checked (Helm 3; kind and kubectl against their pins) and
#      the Kthena to install chosen (ci/kind/kthena.sh): a combination of
#      chart and images known not to work is refused here, before anything
#      is created or installed;
#   1. the cluster KIND_CLUSTER (default kvengine) from ci/kind/cluster.yaml
#      and the pinned node image, unless it exists;
#   2. the images: the bridge built from this repository's Dockerfile; the
#      sim and Redis pulled; Kthena's router and runtime built from the
#      checkout (KTHENA_DIR) or pulled at the release's tag; all loaded into
#      the cluster with `kind load`;
#   3. Kthena's router with helm 3 (the checkout's chart, else the release's),
#      its CRDs applied first (Helm never upgrades them), workload
#      controllers left out, no --wait: the v1.0.0 chart renders
#      Service kthena-router as a LoadBalancer, which kind never gives an
#      address (helm --wait would wait for it until its timeout), so the
#      Service is patched to ClusterIP and the router's rollout is waited for;
#   4. ConfigMap kvengine-kind in Kthena's namespace: the Kthena version and
#      the images, which the driver (fixtures/targets/kind.lua) reads.
#
# Safe to run again: an existing cluster is reused and helm upgrades.
#
# Settings: KTHENA_VERSION or KTHENA_DIR (the version rule, ci/kind/kthena.sh),
# KTHENA_TAG, KTHENA_CHART, KTHENA_CHART_VERSION (overrides, checked by the
# same rule), KIND_CLUSTER, KIND_NODE_IMAGE, KIND_INTERNAL=1 (this script
# runs in a container on the Docker host), KTHENA_NAMESPACE (kthena-system),
# SIM_IMAGE, REDIS_IMAGE, BRIDGE_IMAGE; pinned defaults in ci/kind/versions.env.
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
say() { printf 'ci/kind/up.sh: %s\n' "$*" >&2; }
. "$repo/ci/kind/pins.sh"
. "$repo/ci/kind/kthena.sh"
load_pins "$repo/ci/kind/versions.env"

cluster=${KIND_CLUSTER:-kvengine}
context=kind-$cluster
ns=${KTHENA_NAMESPACE:-kthena-system}
hub=ghcr.io/volcano-sh

for tool in kind kubectl helm docker; do
  command -v "$tool" >/dev/null 2>&1 || {
    say "$tool is not on PATH: docs/kind.md says which version and where to get it"
    exit 2
  }
done
check_tools
plan_kthena
router=$hub/kthena-router:$image_tag
runtime=$hub/runtime:$image_tag
say "Kthena $kthena_version: chart ${chart_version:+$chart_version of }$chart, router $router, runtime $runtime"

# pull IMAGE: unless it is here already.
pull() {
  docker image inspect "$1" >/dev/null 2>&1 || docker pull "$1"
}

if kind get clusters | grep -qx -- "$cluster"; then
  say "reusing kind cluster $cluster"
else
  say "creating kind cluster $cluster ($KIND_NODE_IMAGE)"
  kind create cluster --name "$cluster" --config "$repo/ci/kind/cluster.yaml" --image "$KIND_NODE_IMAGE" --wait 120s
fi

if [ "${KIND_INTERNAL:-0}" = 1 ]; then
  # This script runs in a container beside the cluster's node (a CI job
  # container on the Docker host): join the node's network and talk to the
  # API server at its internal address.
  docker network connect kind "$(hostname)" 2>/dev/null || true
  kind export kubeconfig --name "$cluster" --internal
fi

say "building the bridge image $BRIDGE_IMAGE"
docker build -t "$BRIDGE_IMAGE" -f "$repo/Dockerfile" "$repo"
pull "$SIM_IMAGE"
pull "$REDIS_IMAGE"
if [ -n "$build_dir" ]; then
  say "building Kthena's router and runtime from $build_dir"
  docker build -t "$router" -f "$build_dir/docker/Dockerfile.kthena-router" "$build_dir"
  docker build -t "$runtime" --target runtime -f "$build_dir/python/Dockerfile" "$build_dir/python"
else
  pull "$router"
  pull "$runtime"
fi
for image in "$BRIDGE_IMAGE" "$SIM_IMAGE" "$REDIS_IMAGE" "$router" "$runtime"; do
  kind load docker-image --name "$cluster" "$image"
done

# Helm installs a chart's CRDs on first install only and never upgrades them:
# apply this version's first, so that a cluster that had another Kthena
# version gets them too (main adds ExternalModelProvider, which its router
# waits for).
set -- show crds "$chart"
if [ -n "$chart_version" ]; then set -- "$@" --version "$chart_version"; fi
crds=$(helm "$@")
printf '%s\n' "$crds" | kubectl --context "$context" apply --server-side --force-conflicts -f -

say "installing Kthena's router in $ns"
set -- upgrade --install kthena "$chart"
if [ -n "$chart_version" ]; then set -- "$@" --version "$chart_version"; fi
helm "$@" --namespace "$ns" --create-namespace --kube-context "$context" \
  --set workload.enabled=false \
  --set networking.kthenaRouter.image.tag="$image_tag" \
  --set networking.kthenaRouter.service.type=ClusterIP \
  --set networking.kthenaRouter.terminationGracePeriodSeconds=10 \
  --set networking.kthenaRouter.drainTimeout=5s \
  --timeout 5m

service_type=$(kubectl --context "$context" get service kthena-router -n "$ns" -o 'jsonpath={.spec.type}')
if [ "$service_type" != ClusterIP ]; then
  say "the chart made Service kthena-router a $service_type (chart $chart_name ignores service.type);" \
    "kind gives it no address: patching it to ClusterIP"
  kubectl --context "$context" patch service kthena-router -n "$ns" --type merge -p '{"spec":{"type":"ClusterIP"}}'
fi

if ! kubectl --context "$context" rollout status deployment/kthena-router -n "$ns" --timeout=300s; then
  kubectl --context "$context" get pods -n "$ns" -l app.kubernetes.io/component=kthena-router >&2 || true
  kubectl --context "$context" logs -n "$ns" deployment/kthena-router --tail=20 >&2 || true
  say "Kthena's router did not become Ready (its pods and last log lines above; docs/kind.md, Troubleshooting)"
  exit 1
fi

kubectl --context "$context" apply -n "$ns" -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: kvengine-kind
  labels:
    app.kubernetes.io/part-of: kvengine
data:
  kthena-version: "$kthena_version"
  chart: "$chart"
  chart-version: "$chart_version"
  router-image: "$router"
  runtime-image: "$runtime"
  sim-image: "$SIM_IMAGE"
  bridge-image: "$BRIDGE_IMAGE"
  redis-image: "$REDIS_IMAGE"
YAML
say "ready: Kthena $kthena_version; KVENGINE_TARGET=kind build/kvengine 'scenarios/*.lua' (kube context $context)"
