#!/bin/sh
# Builds the llmd target's router (docs/llmd.md) into build/llmd/:
#
#   llmd-router   llm-d's KV-cache indexer (github.com/llm-d/llm-d-kv-cache
#                 at the version fixtures/llmd/go.mod pins) in the project's
#                 program (fixtures/llmd)
#
# The target's engines are the kthena target's (llm-d-inference-sim and the
# kthena-harness that isolates and forwards it): `make kthena-build` builds
# them into build/kthena.
#
# LLMD_KV_CACHE_DIR=DIR builds against a copy of the module's source in DIR
# instead (a copy of go.mod in build/llmd/mod with a replace directive,
# used with -modfile; the committed go.mod is left as it is): how a test
# builds llm-d with one of its rules changed. LLMD_OUT=DIR builds into DIR.
#
# Go comes from PATH (ci/gobuild.sh: GOTOOLCHAIN=local); the default module
# and build caches are reused. Nothing is rebuilt when the sources and settings are
# as at the last build (build/llmd/stamp).
#
#   ci/llmd/build.sh          build what is out of date
#   ci/llmd/build.sh --check  exit 0 when up to date, 4 when not
#
# Exit status: 0 built (or up to date), 1 the build failed, 3 an
# infrastructure problem (no Go, a Go older than the module needs, the
# module proxy unreachable), 4 out of date (--check).
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
out=${LLMD_OUT:-"$repo/build/llmd"}
src="$repo/fixtures/llmd"
check=0
[ "${1:-}" = "--check" ] && check=1

who="llmd build"
# shellcheck source=ci/gobuild.sh
. "$repo/ci/gobuild.sh"
need_go "$(go_line "$src/go.mod")" fixtures/llmd

dir=""
if [ -n "${LLMD_KV_CACHE_DIR:-}" ]; then
  [ -f "$LLMD_KV_CACHE_DIR/go.mod" ] || infra "LLMD_KV_CACHE_DIR=$LLMD_KV_CACHE_DIR has no go.mod: give a copy of llm-d-kv-cache"
  dir=$(CDPATH="" cd -- "$LLMD_KV_CACHE_DIR" && pwd)
fi

sources="$(fingerprint "$src" "$repo/ci/llmd/build.sh")"
[ -n "$dir" ] && sources="$sources $(fingerprint "$dir/pkg" "$dir/go.mod")"
want="dir=$dir go=$go_have sources=$sources"
if [ -x "$out/llmd-router" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ]; then
  exit 0
fi
if [ "$check" = 1 ]; then
  say "$out is missing or out of date (LLMD_KV_CACHE_DIR='$dir')"
  exit 4
fi
mkdir -p "$out/mod"


modfile="$src/go.mod"
what="github.com/llm-d/llm-d-kv-cache $(cd "$src" && go list -m -f '{{.Version}}' github.com/llm-d/llm-d-kv-cache)"
if [ -n "$dir" ]; then
  modfile="$out/mod/go.mod"
  cp "$src/go.mod" "$modfile"
  cp "$src/go.sum" "$out/mod/go.sum"
  (cd "$src" && go mod edit -modfile="$modfile" -replace="github.com/llm-d/llm-d-kv-cache=$dir")
  what="$what, replaced by $dir"
fi
say "building the router against $what"
start=$(date +%s)
(cd "$src" && run_go go build -modfile="$modfile" -o "$out/llmd-router.new" .)
mv "$out/llmd-router.new" "$out/llmd-router"
printf '%s\n' "$what" >"$out/version"
printf '%s\n' "$want" >"$out/stamp"
say "done in $(($(date +%s) - start)) s: $out"
