#!/bin/sh
# Makes the smg target's virtualenv (docs/smg.md): build/smg/venv, with the
# gateway pinned in ci/smg/requirements.txt, from PyPI (ci/venv.sh).
#
#   ci/smg/build.sh          make it when missing or made from other pins
#   ci/smg/build.sh --check  exit 0 when up to date, 4 when not
#
# SMG_OUT=DIR makes it in DIR instead (the driver finds it through
# KVENGINE_SMG_VENV=DIR/venv).
#
# Exit status: 0 made (or up to date), 3 an infrastructure problem (no
# python3, no venv module, PyPI unreachable: ci/venv.sh names what to
# install), 4 out of date (--check).
set -eu

repo=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
out=${SMG_OUT:-"$repo/build/smg"}
reqs="$repo/ci/smg/requirements.txt"

want="python=$(command -v "${PYTHON:-python3}" || echo none) pins=$(sha256sum "$reqs" | cut -c1-16)"
if [ -x "$out/venv/bin/smg" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ]; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "smg build: $out/venv is missing or was made from other pins: run \`make smg-build\`" >&2
  exit 4
fi
mkdir -p "$out"
start=$(date +%s)
echo "smg build: making $out/venv from $reqs" >&2
sh "$repo/ci/venv.sh" "$out/venv" "$reqs" || exit $?
"$out/venv/bin/pip" show smg 2>/dev/null | sed -n 's/^Version: /smg /p' >"$out/version"
printf '%s\n' "$want" >"$out/stamp"
echo "smg build: done in $(($(date +%s) - start)) s: $(cat "$out/version")" >&2
