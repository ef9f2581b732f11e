#!/bin/sh
# Makes a Python virtualenv from PyPI requirements: the one way the project
# makes one (the kthena target's runtime venv, ci/kthena/build.sh; the smg
# target's, ci/smg/build.sh).
#
#   sh ci/venv.sh DIR REQUIREMENTS_FILE...
#
# DIR is made anew (a half-made one is removed), with pip installing every
# file given (-r each). Python is python3 on PATH, or $PYTHON.
#
# Exit status: 0 made, 3 an infrastructure problem, named with what to
# install: no python3, no venv module, PyPI unreachable or refusing a pin.
set -eu

[ $# -ge 2 ] || {
  echo "usage: ci/venv.sh DIR REQUIREMENTS_FILE..." >&2
  exit 2
}
dir=$1
shift
python=${PYTHON:-python3}

infra() {
  echo "venv: $*" >&2
  rm -rf "$dir"
  exit 3
}

command -v "$python" >/dev/null 2>&1 || infra "no $python on PATH: install python3 (Debian: apt-get install python3 python3-venv)"
rm -rf "$dir"
"$python" -m venv "$dir" >&2 || infra "'$python -m venv' failed: install python3-venv"
reqs=""
for f in "$@"; do
  [ -f "$f" ] || infra "no requirements file $f"
  reqs="$reqs -r $f"
done
# shellcheck disable=SC2086 # the -r pairs are separate words
"$dir/bin/pip" install -q --disable-pip-version-check $reqs >&2 ||
  infra "pip could not install $* into $dir (PyPI reachable? the pins served?)"
