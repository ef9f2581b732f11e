#!/bin/sh
# Installs the kind target's prerequisites at the versions docs/kind.md
# names: kind, kubectl and helm, as their projects' release binaries (none
# is a Debian package), each checked against its published SHA-256.
#
#   sh ci/kind/tools.sh [DIR]     DIR: /usr/local/bin as root, else ~/.local/bin
#
# Docker itself is not installed here: kind needs a running Docker engine.
set -eu

KIND_VERSION=${KIND_VERSION:-v0.29.0}
KUBECTL_VERSION=${KUBECTL_VERSION:-v1.33.2}
HELM_VERSION=${HELM_VERSION:-v3.18.4}

if [ "$(id -u)" -eq 0 ]; then dir=${1:-/usr/local/bin}; else dir=${1:-$HOME/.local/bin}; fi
case $(uname -m) in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) echo "ci/kind/tools.sh: no release binaries for $(uname -m)" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dir"

# fetch URL FILE: download URL to $tmp/FILE.
fetch() {
  curl -fsSL --retry 3 -o "$tmp/$2" "$1"
}

# verify FILE SUMFILE: the first word of SUMFILE is FILE's SHA-256.
verify() {
  want=$(cut -d ' ' -f 1 < "$tmp/$2")
  got=$(sha256sum "$tmp/$1" | cut -d ' ' -f 1)
  if [ "$want" != "$got" ]; then
    echo "ci/kind/tools.sh: $1: SHA-256 $got, expected $want" >&2
    exit 1
  fi
}

fetch "https://kind.sigs.k8s.io/dl/$KIND_VERSION/kind-linux-$arch" kind
fetch "https://kind.sigs.k8s.io/dl/$KIND_VERSION/kind-linux-$arch.sha256sum" kind.sha256
verify kind kind.sha256
install -m 755 "$tmp/kind" "$dir/kind"

fetch "https://dl.k8s.io/release/$KUBECTL_VERSION/bin/linux/$arch/kubectl" kubectl
fetch "https://dl.k8s.io/release/$KUBECTL_VERSION/bin/linux/$arch/kubectl.sha256" kubectl.sha256
verify kubectl kubectl.sha256
install -m 755 "$tmp/kubectl" "$dir/kubectl"

fetch "https://get.helm.sh/helm-$HELM_VERSION-linux-$arch.tar.gz" helm.tar.gz
fetch "https://get.helm.sh/helm-$HELM_VERSION-linux-$arch.tar.gz.sha256sum" helm.sha256
verify helm.tar.gz helm.sha256
tar -xzf "$tmp/helm.tar.gz" -C "$tmp"
install -m 755 "$tmp/linux-$arch/helm" "$dir/helm"

echo "installed kind $KIND_VERSION, kubectl $KUBECTL_VERSION and helm $HELM_VERSION in $dir"
