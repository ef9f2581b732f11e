#!/bin/sh
# Builds the cluster target's node, kvengine-node (fixtures/cluster/node,
# docs/cluster-node.md), into build/cluster/bin/ (KVENGINE_CLUSTER_BIN=DIR
# builds into DIR instead). The module is its own (virtual-kubelet needs
# k8s.io v0.35, the control plane's module pins v0.34).
#
# Go comes from PATH (GOTOOLCHAIN=local: never a downloaded toolchain); the
# default module and build caches are reused between runs. Nothing is
# rebuilt when the sources and the Go are as at the last build
# (kvengine-node.stamp beside the binary).
#
#   ci/cluster/node-build.sh          build what is out of date
#   ci/cluster/node-build.sh --check  exit 0 when up to date, 4 when not
#
# Exit status: 0 built (or up to date), 1 the build failed, 3 an
# infrastructure problem (no Go, a Go older than the module needs, the
# module proxy unreachable), 4 out of date (--check).
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
out=${KVENGINE_CLUSTER_BIN:-"$repo/build/cluster/bin"}
src="$repo/fixtures/cluster/node"
check=0
[ "${1:-}" = "--check" ] && check=1

who="node build"
# shellcheck source=ci/gobuild.sh
. "$repo/ci/gobuild.sh"
need_go "$(go_line "$src/go.mod")" fixtures/cluster/node
have=$go_have

sources=$(fingerprint "$src" "$repo/ci/cluster/node-build.sh")
want="go=$have sources=$sources"
bin="$out/kvengine-node"
if [ -x "$bin" ] && [ -f "$bin.stamp" ] && [ "$(cat "$bin.stamp")" = "$want" ]; then
  exit 0
fi
if [ "$check" = 1 ]; then
  say "$bin is missing or out of date"
  exit 4
fi
mkdir -p "$out"

start=$(date +%s)
say "building kvengine-node (virtual-kubelet $(cd "$src" && go list -m -f '{{.Version}}' github.com/virtual-kubelet/virtual-kubelet))"
(cd "$src" && export CGO_ENABLED=0 && run_go go build -o "$bin.new" .)
mv "$bin.new" "$bin"
printf '%s\n' "$want" >"$bin.stamp"
say "done in $(($(date +%s) - start)) s: $bin"
