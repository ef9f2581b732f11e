#!/bin/sh
# Builds the cluster target's control plane (docs/cluster.md) into
# build/cluster/bin/:
#
#   etcd                     go.etcd.io/etcd/server/v3 (fixtures/cluster/etcd)
#   kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
#   kubectl                  k8s.io/kubernetes (fixtures/cluster/kube)
#   helm                     helm.sh/helm/v3 (fixtures/cluster/helm)
#
# The three go.mod files are the one place the versions are pinned; the
# binaries are stamped with them (`kubectl version`, `helm version` and the
# API server's /version report the release, not v0.0.0-master).
#
# KUBEBUILDER_ASSETS (envtest's folder of etcd, kube-apiserver and kubectl),
# and TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER, TEST_ASSET_KUBECTL for one
# binary each, as envtest reads them: a binary found there is used instead of
# building it (fixtures/cluster/binaries.lua finds it the same way at start).
#
# Go comes from PATH (ci/gobuild.sh: GOTOOLCHAIN=local, the default module
# and build caches). Nothing is rebuilt when the sources, the Go version
# and the set of binaries to build are as at the last build
# (build/cluster/stamp).
#
#   ci/cluster/build.sh          build what is out of date
#   ci/cluster/build.sh --check  exit 0 when up to date, 4 when not
#
# Exit status: 0 built (or up to date), 1 the build failed, 3 an
# infrastructure problem (no Go, a Go older than the modules need, the
# module proxy unreachable), 4 out of date (--check).
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
out=${CLUSTER_OUT:-"$repo/build/cluster"}
src="$repo/fixtures/cluster"
check=0
[ "${1:-}" = "--check" ] && check=1

who="cluster build"
# shellcheck source=ci/gobuild.sh
. "$repo/ci/gobuild.sh"
for m in kube etcd helm; do need_go "$(go_line "$src/$m/go.mod")" "fixtures/cluster/$m"; done

# Whether envtest's settings supply the binary $1 (its TEST_ASSET_ variable
# $2, else $KUBEBUILDER_ASSETS/$1).
supplied() {
  eval "one=\${$2:-}"
  [ -n "$one" ] && [ -x "$one" ] && return 0
  [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$1" ]
}
kube="kube-controller-manager kube-scheduler kube-proxy"
supplied kube-apiserver TEST_ASSET_KUBE_APISERVER || kube="kube-apiserver $kube"
supplied kubectl TEST_ASSET_KUBECTL || kube="$kube kubectl"
etcd=etcd
supplied etcd TEST_ASSET_ETCD && etcd=""

want="go=$go_have build=$kube $etcd helm sources=$(fingerprint "$src" "$repo/ci/cluster/build.sh" "$repo/ci/gobuild.sh")"
missing=""
for b in $kube $etcd helm; do [ -x "$out/bin/$b" ] || missing="$missing $b"; done
if [ -z "$missing" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ]; then
  exit 0
fi
if [ "$check" = 1 ]; then
  say "build/cluster is missing or out of date (missing:${missing:- none})"
  exit 4
fi
mkdir -p "$out/bin"
rm -f "$out/stamp"

# The version go.mod pins for module $2, in the module at $1.
pinned() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }
start=$(date +%s)

k8s=$(pinned "$src/kube" k8s.io/kubernetes)
minor=$(echo "$k8s" | cut -d. -f2)
say "building$(printf ' %s' $kube) from k8s.io/kubernetes $k8s"
ld="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1"
ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
pkgs=""
for b in $kube; do pkgs="$pkgs k8s.io/kubernetes/cmd/$b"; done
# shellcheck disable=SC2086 # one word per package
(cd "$src/kube" && run_go go build -trimpath -ldflags "$ld" -o "$out/bin/" $pkgs)

if [ -n "$etcd" ]; then
  v=$(pinned "$src/etcd" go.etcd.io/etcd/server/v3)
  say "building etcd from go.etcd.io/etcd/server/v3 $v"
  (cd "$src/etcd" && run_go go build -trimpath -ldflags "-s -w" -o "$out/bin/etcd" .)
fi

v=$(pinned "$src/helm" helm.sh/helm/v3)
kv=$(pinned "$src/helm" k8s.io/client-go)
say "building helm from helm.sh/helm/v3 $v"
ld="-s -w -X helm.sh/helm/v3/internal/version.version=$v -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in pkg/lint/rules pkg/chartutil; do
  ld="$ld -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$(echo "$kv" | cut -d. -f2)"
done
(cd "$src/helm" && run_go go build -trimpath -ldflags "$ld" -o "$out/bin/helm" helm.sh/helm/v3/cmd/helm)

printf '%s\n' "$want" >"$out/stamp"
say "done in $(($(date +%s) - start)) s: $out/bin"
