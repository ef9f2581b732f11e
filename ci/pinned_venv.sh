#!/bin/sh
# ci/pinned_venv.sh - a peer target's virtualenv, from the pins it keeps in
# ci/NAME/requirements.txt: build/NAME/venv, made through ci/venv.sh (the
# project's one way of making one) and made again only when the pins,
# ci/venv.sh or the Python change (build/NAME/stamp); build/NAME/version
# says "PACKAGE VERSION". A requirements file that pins hashes is installed
# exactly (ci/venv.sh --exact: nothing unlisted, every hash checked).
#
#   sh ci/pinned_venv.sh NAME PACKAGE          make it when out of date
#   sh ci/pinned_venv.sh NAME PACKAGE --check  exit 0 when up to date, 4 when not
#
# VENV_OUT=DIR makes it in DIR instead of build/NAME (the target finds it
# through its KVENGINE_<NAME>_VENV=DIR/venv).
#
# Exit status: 0 made (or up to date), 3 an infrastructure problem (no
# python3 or venv module, PyPI unreachable, a pin not served for this
# Python: ci/venv.sh names what to install), 4 out of date (--check).
set -eu

[ $# -ge 2 ] || { echo "usage: ci/pinned_venv.sh NAME PACKAGE [--check]" >&2; exit 2; }
name=$1 package=$2
repo=$(CDPATH="" cd -- "$(dirname -- "$0")/.." && pwd)
out=${VENV_OUT:-"$repo/build/$name"}
reqs="$repo/ci/$name/requirements.txt"
say() { echo "$name build: $*" >&2; }

want="python=$(python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo none)"
want="$want pins=$(sha256sum "$reqs" "$repo/ci/venv.sh" | sha256sum | cut -c1-16)"
if [ -x "$out/venv/bin/python" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ]; then
  exit 0
fi
if [ "${3:-}" = "--check" ]; then
  say "$out/venv is missing or out of date: run \`make $name-build\` (ci/$name/build.sh)"
  exit 4
fi
exact=""
grep -q -- '--hash' "$reqs" && exact="--exact"
mkdir -p "$out"
start=$(date +%s)
say "making $out/venv from ci/$name/requirements.txt"
# shellcheck disable=SC2086 # $exact is one word or none
sh "$repo/ci/venv.sh" "$out/venv" $exact "$reqs" || exit $?
version=$("$out/venv/bin/python" -c "import importlib.metadata as m; print(m.version('$package'))")
printf '%s %s\n' "$package" "$version" >"$out/version"
printf '%s\n' "$want" >"$out/stamp"
say "$package $version in $(($(date +%s) - start)) s: $out/venv"
