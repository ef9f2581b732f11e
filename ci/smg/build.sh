#!/bin/sh
# Makes the smg target's virtualenv (docs/smg.md): SGLang's gateway, PyPI's
# smg at the version ci/smg/requirements.txt pins, in build/smg/venv
# (ci/pinned_venv.sh).
#
#   ci/smg/build.sh          make what is out of date
#   ci/smg/build.sh --check  exit 0 when up to date, 4 when not
#
# SMG_OUT=DIR makes it in DIR instead (the driver finds it through
# KVENGINE_SMG_VENV=DIR/venv). Exit status: ci/pinned_venv.sh's.
VENV_OUT=${SMG_OUT:-} exec sh "$(dirname -- "$0")/../pinned_venv.sh" smg smg "$@"
