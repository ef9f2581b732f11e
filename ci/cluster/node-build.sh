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
export GOTOOLCHAIN=local
check=0
[ "${1:-}" = "--check" ] && check=1

say() { echo "node build: $*" >&2; }
infra() {
  say "$*"
  exit 3
}

command -v go >/dev/null 2>&1 || infra "no Go on PATH: install Go (https://go.dev/dl/, or Debian's golang-go if recent enough)"
need=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$src/go.mod" | head -n 1)
have=$(go env GOVERSION | sed 's/^go//')
lowest=$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)
[ "$lowest" = "$need" ] || infra "fixtures/cluster/node needs Go $need or newer; go on PATH is $have: install a newer Go"

sources=$(find "$src" "$repo/ci/cluster/node-build.sh" -type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name '*.sh' \) \
  ! -name '*_test.go' -exec sha256sum {} + | LC_ALL=C sort -k 2 | sha256sum | cut -c1-16)
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
if ! log=$(cd "$src" && CGO_ENABLED=0 go build -o "$bin.new" . 2>&1); then
  printf '%s\n' "$log" >&2
  case "$log" in
    *"dial tcp"* | *"no such host"* | *"i/o timeout"* | *"connection refused"* | *"TLS handshake"* | \
      *"403 Forbidden"* | *"404 Not Found"* | *"410 Gone"* | *"unrecognized import path"*)
      infra "the Go module proxy ($(go env GOPROXY)) could not serve a module (above): check the network and GOPROXY" ;;
  esac
  say "the build failed (above)"
  exit 1
fi
mv "$bin.new" "$bin"
printf '%s\n' "$want" >"$bin.stamp"
say "done in $(($(date +%s) - start)) s: $bin"
