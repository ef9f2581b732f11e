#!/bin/sh
# Makes a Python virtualenv from PyPI, for the targets that run a peer's
# Python code (the kthena target's KTHENA_DIR runtime, ci/kthena/build.sh;
# the dynamo target's selection service, ci/dynamo/build.sh):
#
#   ci/venv.sh DIR [--exact] REQUIREMENTS...
#
# DIR is made afresh (python3 -m venv) and pip installs each requirements
# file into it. With --exact every file is installed with --no-deps (the
# file pins the whole set, so nothing unlisted comes in), a file holding
# --hash lines with --require-hashes, and `pip check` then says the set is
# consistent.
#
# Exit status: 0 made, 3 an infrastructure problem (no python3, no venv
# module, pip could not install: PyPI unreachable or a pin not served
# for this Python), each saying what to install or check.
set -eu

say() { echo "venv: $*" >&2; }
infra() {
  say "$*"
  exit 3
}

[ $# -ge 2 ] || { echo "usage: ci/venv.sh DIR [--exact] REQUIREMENTS..." >&2; exit 2; }
dir=$1
shift
exact=0
if [ "$1" = "--exact" ]; then
  exact=1
  shift
fi

command -v python3 >/dev/null 2>&1 || infra "no python3 on PATH: install Python 3 (Debian: apt-get install python3 python3-venv)"
rm -rf "$dir"
python3 -m venv "$dir" >&2 || infra "python3 -m venv failed: install the venv module (Debian: apt-get install python3-venv)"
[ -x "$dir/bin/pip" ] || infra "$dir has no pip: install python3-venv with ensurepip (Debian: apt-get install python3-venv)"

for reqs in "$@"; do
  [ -f "$reqs" ] || infra "no requirements file $reqs"
  flags=""
  if [ "$exact" = 1 ]; then
    flags="--no-deps"
    if grep -q -- '--hash' "$reqs"; then flags="$flags --require-hashes"; fi
  fi
  # shellcheck disable=SC2086 # the flags are separate words
  "$dir/bin/pip" install -q --disable-pip-version-check $flags -r "$reqs" >&2 ||
    infra "pip could not install $reqs into $dir (is PyPI reachable? pip's error above)"
done
if [ "$exact" = 1 ]; then
  "$dir/bin/pip" check >&2 || infra "the pinned set in $* is not consistent (pip check above)"
fi
