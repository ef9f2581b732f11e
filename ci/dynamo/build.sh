#!/bin/sh
# Makes the dynamo target's virtualenv (docs/dynamo.md): Dynamo's
# selection service, PyPI's ai-dynamo-runtime at the version and hashes
# ci/dynamo/requirements.txt pins, in build/dynamo/venv, through the
# project's one way of making a virtualenv (ci/venv.sh). Nothing is made
# again while the pins are as at the last build (build/dynamo/stamp).
#
#   ci/dynamo/build.sh          make what is out of date
#   ci/dynamo/build.sh --check  exit 0 when up to date, 4 when not
#
# DYNAMO_OUT=DIR builds into DIR instead (the driver finds it through
# KVENGINE_DYNAMO_VENV=DIR/venv).
#
# Exit status: 0 made (or up to date), 3 an infrastructure problem (no
# python3 or venv module, PyPI unreachable, a pin not served for this
# Python), 4 out of date (--check).
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
out=${DYNAMO_OUT:-"$repo/build/dynamo"}
reqs="$repo/ci/dynamo/requirements.txt"

want="python=$(python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo none)"
want="$want pins=$(sha256sum "$reqs" "$repo/ci/venv.sh" | sha256sum | cut -c1-16)"
if [ -x "$out/venv/bin/python" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ]; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "dynamo build: $out/venv is missing or out of date: run \`make dynamo-build\` (ci/dynamo/build.sh)" >&2
  exit 4
fi
mkdir -p "$out"
start=$(date +%s)
echo "dynamo build: making $out/venv from ci/dynamo/requirements.txt" >&2
sh "$repo/ci/venv.sh" "$out/venv" --exact "$reqs" || exit $?
version=$("$out/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ai-dynamo-runtime"))')
printf 'ai-dynamo-runtime %s\n' "$version" >"$out/version"
printf '%s\n' "$want" >"$out/stamp"
echo "dynamo build: ai-dynamo-runtime $version in $(($(date +%s) - start)) s: $out/venv" >&2
