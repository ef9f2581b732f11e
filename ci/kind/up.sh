#!/bin/sh
# Creates (or reuses) the Kind cluster of the kind target and installs what
# the suite needs, then waits for Kthena's router (docs/kind.md):
#
#   1. the cluster KIND_CLUSTER (default kvengine) from ci/kind/cluster.yaml,
#      unless it exists;
#   2. the images: the bridge built from this repository's Dockerfile; the
#      sim (llm-d-inference-sim, pinned tag) and Redis pulled; Kthena's
#      router and runtime built from a checkout (KTHENA_DIR) or pulled by tag
#      (KTHENA_TAG); all loaded into the cluster with `kind load`;
#   3. Kthena's router with helm (the chart of KTHENA_DIR, else the released
#      chart KTHENA_CHART_VERSION), the workload controllers left out;
#   4. ConfigMap kvengine-kind in Kthena's namespace: the images the driver
#      (fixtures/targets/kind.lua) puts in its pods.
#
# Safe to run again: an existing cluster is reused and helm upgrades.
#
# Settings: KIND_CLUSTER, KIND_NODE_IMAGE (kindest/node:<tag>, optional),
# KIND_INTERNAL=1 (this script runs in a container on the Docker host),
# KTHENA_NAMESPACE (kthena-system), KTHENA_DIR, KTHENA_TAG (latest; kvengine
# for a checkout), KTHENA_CHART (a chart path or oci:// reference),
# KTHENA_CHART_VERSION, SIM_IMAGE, REDIS_IMAGE, BRIDGE_IMAGE.
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
cluster=${KIND_CLUSTER:-kvengine}
context=kind-$cluster
ns=${KTHENA_NAMESPACE:-kthena-system}
hub=ghcr.io/volcano-sh
sim=${SIM_IMAGE:-ghcr.io/llm-d/llm-d-inference-sim:v0.10.2}
redis=${REDIS_IMAGE:-redis:7.2-alpine}
bridge=${BRIDGE_IMAGE:-kvengine-bridge:dev}
kthena_dir=${KTHENA_DIR:-}

if [ -n "$kthena_dir" ]; then
  tag=${KTHENA_TAG:-kvengine}
  chart=${KTHENA_CHART:-$kthena_dir/charts/kthena}
  chart_version=
else
  tag=${KTHENA_TAG:-latest}
  chart=${KTHENA_CHART:-oci://ghcr.io/volcano-sh/charts/kthena}
  # Released charts are versioned like their images; `latest` images have
  # no chart of their own.
  case $tag in
    v[0-9]*) chart_version=${KTHENA_CHART_VERSION:-$tag} ;;
    *) chart_version=${KTHENA_CHART_VERSION:-v1.0.0} ;;
  esac
fi
router=$hub/kthena-router:$tag
runtime=$hub/runtime:$tag

say() { printf 'ci/kind/up.sh: %s\n' "$*" >&2; }

# pull IMAGE: unless it is here already.
pull() {
  docker image inspect "$1" >/dev/null 2>&1 || docker pull "$1"
}

for tool in kind kubectl helm docker; do
  command -v "$tool" >/dev/null 2>&1 || {
    say "$tool is not on PATH: docs/kind.md says which version and where to get it"
    exit 2
  }
done

if kind get clusters | grep -qx -- "$cluster"; then
  say "reusing kind cluster $cluster"
else
  say "creating kind cluster $cluster"
  if [ -n "${KIND_NODE_IMAGE:-}" ]; then
    kind create cluster --name "$cluster" --config "$repo/ci/kind/cluster.yaml" --image "$KIND_NODE_IMAGE" --wait 120s
  else
    kind create cluster --name "$cluster" --config "$repo/ci/kind/cluster.yaml" --wait 120s
  fi
fi

if [ "${KIND_INTERNAL:-0}" = 1 ]; then
  # This script runs in a container beside the cluster's node (a CI job
  # container on the Docker host): join the node's network and talk to the
  # API server at its internal address.
  docker network connect kind "$(hostname)" 2>/dev/null || true
  kind export kubeconfig --name "$cluster" --internal
fi

say "building the bridge image $bridge"
docker build -t "$bridge" -f "$repo/Dockerfile" "$repo"
pull "$sim"
pull "$redis"
if [ -n "$kthena_dir" ]; then
  say "building Kthena's router and runtime from $kthena_dir"
  docker build -t "$router" -f "$kthena_dir/docker/Dockerfile.kthena-router" "$kthena_dir"
  docker build -t "$runtime" --target runtime -f "$kthena_dir/python/Dockerfile" "$kthena_dir/python"
else
  pull "$router"
  pull "$runtime"
fi
for image in "$bridge" "$sim" "$redis" "$router" "$runtime"; do
  kind load docker-image --name "$cluster" "$image"
done

say "installing Kthena's router in $ns"
set -- upgrade --install kthena "$chart"
if [ -n "$chart_version" ]; then set -- "$@" --version "$chart_version"; fi
helm "$@" --namespace "$ns" --create-namespace --kube-context "$context" \
  --set workload.enabled=false \
  --set networking.kthenaRouter.image.tag="$tag" \
  --set networking.kthenaRouter.service.type=ClusterIP \
  --set networking.kthenaRouter.terminationGracePeriodSeconds=10 \
  --set networking.kthenaRouter.drainTimeout=5s \
  --wait --timeout 5m

kubectl --context "$context" apply -n "$ns" -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: kvengine-kind
  labels:
    app.kubernetes.io/part-of: kvengine
data:
  sim-image: "$sim"
  bridge-image: "$bridge"
  runtime-image: "$runtime"
  redis-image: "$redis"
YAML
kubectl --context "$context" rollout status deployment/kthena-router -n "$ns" --timeout=300s
say "ready: KVENGINE_TARGET=kind build/kvengine 'scenarios/*.lua' (kube context $context)"
