#!/usr/bin/env bash
# Installs what `make html-check` renders the HTML report with: Chromium
# (headless), ImageMagick and a font. Nothing else needs them, so
# ci/install-deps.sh leaves them out. Uses sudo only when not root.
set -euo pipefail

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium imagemagick fonts-dejavu-core
