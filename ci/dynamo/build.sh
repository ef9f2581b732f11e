#!/bin/sh
# Makes the dynamo target's virtualenv (docs/dynamo.md): Dynamo's
# selection service, PyPI's ai-dynamo-runtime at the version and hashes
# ci/dynamo/requirements.txt pins, in build/dynamo/venv (ci/pinned_venv.sh).
#
#   ci/dynamo/build.sh          make what is out of date
#   ci/dynamo/build.sh --check  exit 0 when up to date, 4 when not
#
# DYNAMO_OUT=DIR builds into DIR instead (the driver finds it through
# KVENGINE_DYNAMO_VENV=DIR/venv). Exit status: ci/pinned_venv.sh's.
VENV_OUT=${DYNAMO_OUT:-} exec sh "$(dirname -- "$0")/../pinned_venv.sh" dynamo ai-dynamo-runtime "$@"
