#!/bin/sh
# Builds the kthena target's two programs (docs/targets.md) into build/kthena/:
#
#   kthena-harness       Kthena's router run out of cluster (fixtures/kthena)
#   llm-d-inference-sim  the real simulator (fixtures/kthena/sim, CGO_ENABLED=0)
#
# Which Kthena: by default the version fixtures/kthena/go.mod pins,
# v1.0.0, the only one the Go module proxy serves (it refuses the
# pseudo-versions of main). KTHENA_DIR=/path/to/kthena builds against that
# checkout instead, and KTHENA_VERSION=vX.Y.Z against another tagged
# release; either way a copy of go.mod in build/kthena/mod is edited and
# used with -modfile, never the committed file. The controller constructors
# changed after v1.0.0; the build tag for them is chosen by reading the
# constructor's signature in the source being built (KTHENA_CTOR=plain|err
# overrides). The simulator's version is the one fixtures/kthena/sim/go.mod
# requires.
#
# With KTHENA_DIR the checkout is tested whole: its runtime sidecar too.
# The build makes a virtualenv for that runtime (from the checkout's
# requirements, through ci/venv.sh), which the kthena target then runs instead of
# the project's (fixtures/targets/kthena.lua). KTHENA_RUNTIME=local keeps
# the project's runtime (no virtualenv); KTHENA_RUNTIME=real says the
# default out loud.
#
# KTHENA_DEPLOY=1 builds Kthena's own kthena-router and
# kthena-controller-manager commands too, from the same Kthena (the module
# or KTHENA_DIR), for the cluster target, whose node runs them for the
# chart's images (fixtures/cluster/images.lua); a copy of the module file
# that `go build -mod=mod` may complete with what those commands import.
#
# KTHENA_OUT=DIR builds into DIR instead (a second build beside the usual
# one; the driver finds it through KVENGINE_KTHENA_BIN=DIR).
#
# Go comes from PATH (GOTOOLCHAIN=local: never a downloaded toolchain;
# ci/gobuild.sh); the default module and build caches are reused between
# runs. Nothing is rebuilt when the sources, the Kthena source and the
# settings are as at the last build (build/kthena/stamp).
#
#   ci/kthena/build.sh          build what is out of date
#   ci/kthena/build.sh --check  exit 0 when up to date, 4 when not
#
# Exit status: 0 built (or up to date), 1 the build failed, 3 an
# infrastructure problem (no Go, a Go older than the modules need, the
# module proxy unreachable), 4 out of date (--check).
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
out=${KTHENA_OUT:-"$repo/build/kthena"}
harness_src="$repo/fixtures/kthena"
sim_src="$harness_src/sim"
check=0
[ "${1:-}" = "--check" ] && check=1

who="kthena build"
# shellcheck source=ci/gobuild.sh
. "$repo/ci/gobuild.sh"
need_go "$(go_line "$harness_src/go.mod")" "fixtures/kthena"
need_go "$(go_line "$sim_src/go.mod")" "fixtures/kthena/sim"

kthena_dir=""
if [ -n "${KTHENA_DIR:-}" ]; then
  [ -f "$KTHENA_DIR/go.mod" ] || infra "KTHENA_DIR=$KTHENA_DIR has no go.mod: give a Kthena checkout"
  kthena_dir=$(CDPATH="" cd -- "$KTHENA_DIR" && pwd)
  need_go "$(go_line "$kthena_dir/go.mod")" "Kthena at $kthena_dir"
fi
version=${KTHENA_VERSION:-}
runtime=${KTHENA_RUNTIME:-}
case "$runtime" in
"") [ -n "$kthena_dir" ] && runtime=real ;;
local) runtime="" ;;
real) [ -n "$kthena_dir" ] || infra "KTHENA_RUNTIME=real runs a checkout's runtime: set KTHENA_DIR too" ;;
*) infra "KTHENA_RUNTIME=$runtime: local (the project's runtime) or real (KTHENA_DIR's own, its default)" ;;
esac

sources="$(fingerprint "$harness_src" "$repo/ci/kthena/build.sh")"
[ -n "$kthena_dir" ] && sources="$sources $(fingerprint "$kthena_dir/go.mod" "$kthena_dir/go.sum" \
  "$kthena_dir/pkg" "$kthena_dir/client-go")"
[ -n "$runtime" ] && sources="$sources runtime=$(fingerprint "$kthena_dir/python/kthena/runtime/requirements.txt" \
  "$kthena_dir/python/kthena/downloader/requirements.txt" 2>/dev/null)"
deploy=${KTHENA_DEPLOY:-0}
case "$deploy" in 0 | 1) ;; *) infra "KTHENA_DEPLOY=$deploy: 1 (build Kthena's router and controller-manager) or 0" ;; esac
want="dir=$kthena_dir version=$version ctor=${KTHENA_CTOR:-} go=$go_have deploy=$deploy sources=$sources"
# A build with Kthena's commands serves a request without them too.
with_deploy=$(printf '%s\n' "$want" | sed 's/ deploy=0 / deploy=1 /')
if [ -x "$out/kthena-harness" ] && [ -x "$out/llm-d-inference-sim" ] && [ -f "$out/stamp" ] &&
  { [ "$deploy" = 0 ] || { [ -x "$out/kthena-router" ] && [ -x "$out/kthena-controller-manager" ]; }; } &&
  { [ -z "$runtime" ] || [ -x "$out/venv/bin/python" ]; } &&
  { [ "$(cat "$out/stamp")" = "$want" ] || [ "$(cat "$out/stamp")" = "$with_deploy" ]; }; then
  exit 0
fi
if [ "$check" = 1 ]; then
  say "build/kthena is missing or out of date (KTHENA_DIR='$kthena_dir' KTHENA_VERSION='$version')"
  exit 4
fi
mkdir -p "$out/mod"

# The module file the harness builds with.
modfile="$harness_src/go.mod"
if [ -n "$kthena_dir" ] || [ -n "$version" ]; then
  modfile="$out/mod/go.mod"
  cp "$harness_src/go.mod" "$modfile"
  cp "$harness_src/go.sum" "$out/mod/go.sum"
  (
    cd "$harness_src"
    if [ -n "$version" ]; then
      go mod edit -modfile="$modfile" -require="github.com/volcano-sh/kthena@$version"
    fi
    if [ -n "$kthena_dir" ]; then
      go mod edit -modfile="$modfile" -replace="github.com/volcano-sh/kthena=$kthena_dir"
    fi
  )
  (cd "$harness_src" && run_go go mod tidy -modfile="$modfile")
fi

# The controller constructors' shape in the source being built.
src=$kthena_dir
if [ -z "$src" ]; then
  src=$(cd "$harness_src" && go list -modfile="$modfile" -m -f '{{.Dir}}' github.com/volcano-sh/kthena)
fi
ctor=${KTHENA_CTOR:-}
if [ -z "$ctor" ]; then
  if grep -q '^) (\*ModelServerController, error) {' "$src/pkg/kthena-router/controller/modelserver_controller.go"; then
    ctor=err
  else
    ctor=plain
  fi
fi
tags=""
[ "$ctor" = err ] && tags="kthena_ctor_err"
case "$ctor" in plain | err) ;; *) infra "KTHENA_CTOR=$ctor: plain (v1.0.0) or err (later)" ;; esac

if [ -n "$kthena_dir" ]; then
  what="Kthena checkout $kthena_dir"
  rev=$(git -C "$kthena_dir" rev-parse --short HEAD 2>/dev/null || true)
  [ -n "$rev" ] && what="$what ($rev)"
else
  what="github.com/volcano-sh/kthena $(cd "$harness_src" && go list -modfile="$modfile" -m -f '{{.Version}}' github.com/volcano-sh/kthena)"
fi
say "building the router harness against $what (constructors: $ctor)"
start=$(date +%s)
(cd "$harness_src" && run_go go build -modfile="$modfile" -tags "$tags" -o "$out/kthena-harness.new" .)
mv "$out/kthena-harness.new" "$out/kthena-harness"

say "building llm-d-inference-sim $(cd "$sim_src" && go list -m -f '{{.Version}}' github.com/llm-d/llm-d-inference-sim)"
(cd "$sim_src" && run_go env CGO_ENABLED=0 go build -o "$out/llm-d-inference-sim.new" \
  github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim)
mv "$out/llm-d-inference-sim.new" "$out/llm-d-inference-sim"

# Kthena's own commands, as the chart's images run them (KTHENA_DEPLOY=1).
if [ "$deploy" = 1 ]; then
  say "building kthena-router and kthena-controller-manager against $what"
  mkdir -p "$out/mod-deploy" "$out/deploy.new"
  cp "$modfile" "$out/mod-deploy/go.mod"
  cp "$(dirname "$modfile")/go.sum" "$out/mod-deploy/go.sum"
  (cd "$harness_src" && run_go env GOFLAGS=-mod=mod go build -modfile="$out/mod-deploy/go.mod" -trimpath \
    -o "$out/deploy.new/" github.com/volcano-sh/kthena/cmd/kthena-router \
    github.com/volcano-sh/kthena/cmd/kthena-controller-manager)
  mv "$out/deploy.new/kthena-router" "$out/deploy.new/kthena-controller-manager" "$out/"
  rmdir "$out/deploy.new"
fi

# Kthena's own runtime sidecar (with KTHENA_DIR, unless KTHENA_RUNTIME=local):
# the checkout's Python code, run from a virtualenv made from its
# requirements (PyPI).
if [ -n "$runtime" ]; then
  say "making the runtime's virtualenv from $kthena_dir/python/kthena/{runtime,downloader}/requirements.txt"
  set -- "$kthena_dir/python/kthena/runtime/requirements.txt"
  [ -f "$kthena_dir/python/kthena/downloader/requirements.txt" ] &&
    set -- "$@" "$kthena_dir/python/kthena/downloader/requirements.txt"
  sh "$repo/ci/venv.sh" "$out/venv" "$@" || exit $?
else
  rm -rf "$out/venv"
fi

printf '%s\n' "$what" >"$out/version"
printf '%s\n' "$want" >"$out/stamp"
say "done in $(($(date +%s) - start)) s: $out"
