#!/bin/sh
# Deletes the Kind cluster of the kind target (KIND_CLUSTER, default
# kvengine), and with it everything the suite left there.
set -eu
kind delete cluster --name "${KIND_CLUSTER:-kvengine}"
