#!/bin/sh
# The actionlint part of `make lint`: every workflow in .github/workflows
# checked by actionlint, built once from the pinned Go module ci/actionlint
# into TOOLS (build/tools) and rebuilt only when that module changes.
# Without Go, or with a Go older than the module needs, it says why it
# skipped and succeeds: nothing but Go modules is ever downloaded (from the
# Go module proxy, checked against go.sum), and never a Go toolchain.
#
#   sh ci/actionlint.sh TOOLS
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/.." && pwd)
tools=$(mkdir -p "$1" && CDPATH="" cd -- "$1" && pwd)
mod=$repo/ci/actionlint
bin=$tools/actionlint
pinned=$(sed -n 's#^require github.com/rhysd/actionlint \(v[^ ]*\)$#\1#p' "$mod/go.mod")

skip() {
  echo "lint: skipped actionlint $pinned: $*"
  exit 0
}

if [ ! -x "$bin" ] || [ "$mod/go.mod" -nt "$bin" ] || [ "$mod/go.sum" -nt "$bin" ]; then
  command -v go >/dev/null 2>&1 || skip "go is not on PATH (actionlint is the Go module pinned in ci/actionlint/go.mod)"
  need=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$mod/go.mod")
  have=$(go env GOVERSION | sed 's/^go//')
  lowest=$(printf '%s\n%s\n' "$need" "$have" | sort -t. -k1,1n -k2,2n -k3,3n | head -n 1)
  [ "$lowest" = "$need" ] || skip "go $have is older than the go $need ci/actionlint/go.mod needs"
  echo "lint: building actionlint $pinned into $bin"
  (cd "$mod" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOWORK=off go build -o "$bin" github.com/rhysd/actionlint/cmd/actionlint)
fi
cd "$repo"
"$bin" -no-color .github/workflows/*.yml
