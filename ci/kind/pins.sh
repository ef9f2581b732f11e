# pins.sh - sourced by ci/kind/*.sh: the pinned versions of
# ci/kind/versions.env as shell variables, each unless the environment sets
# it already (so `HELM_VERSION=v3.17.0 sh ci/kind/up.sh` works), and the
# checks of the tools on PATH against them.

# load_pins FILE: every KEY=value line of FILE, exported.
load_pins() {
  while IFS='=' read -r key value; do
    case $key in
      '' | \#*) continue ;;
      *[!A-Z0-9_]*) printf 'ci/kind: %s: bad line %s\n' "$1" "$key" >&2; exit 2 ;;
    esac
    eval "set_already=\${$key+x}"
    # shellcheck disable=SC2154 # set by the eval above
    if [ -z "$set_already" ]; then
      eval "$key=\$value"
      export "${key?}"
    fi
  done < "$1"
}

# The MAJOR.MINOR.PATCH numbers of a version such as v1.33.1 or 0.29.0, as
# three words.
version_core() {
  printf '%s\n' "${1#v}" | sed -e 's/[-+].*//' -e 's/\./ /g'
}

# version_le A B: A <= B, comparing MAJOR.MINOR.PATCH (a pre-release counts
# as its release).
version_le() {
  # shellcheck disable=SC2046 # word splitting into the three numbers is the point
  set -- $(version_core "$1") $(version_core "$2")
  [ "${1:-0}" -lt "${4:-0}" ] && return 0
  [ "${1:-0}" -gt "${4:-0}" ] && return 1
  [ "${2:-0}" -lt "${5:-0}" ] && return 0
  [ "${2:-0}" -gt "${5:-0}" ] && return 1
  [ "${3:-0}" -le "${6:-0}" ]
}

# check_tools: helm must be Helm 3 (refused otherwise); kind and kubectl are
# compared with their pins and only warned about.
check_tools() {
  helm_version=$(helm version --template '{{.Version}}' 2>/dev/null || true)
  case $helm_version in
    v3.*) ;;
    *)
      say "refused: helm ${helm_version:-(no version)} is not Helm 3. The kind target is tested with Helm $HELM_VERSION;" \
        "Helm 4's --wait and server-side apply behave differently. Install Helm $HELM_VERSION (docs/kind.md)"
      exit 2 ;;
  esac
  [ "$helm_version" = "$HELM_VERSION" ] ||
    say "note: helm $helm_version, not the pinned $HELM_VERSION (ci/kind/versions.env)"
  kind_version=v$(kind version -q 2>/dev/null || true)
  [ "$kind_version" = "$KIND_VERSION" ] ||
    say "note: kind $kind_version, not the pinned $KIND_VERSION (ci/kind/versions.env)"
  kubectl_version=$(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n 1)
  [ "$kubectl_version" = "$KUBECTL_VERSION" ] ||
    say "note: kubectl ${kubectl_version:-(unknown)}, not the pinned $KUBECTL_VERSION (ci/kind/versions.env)"
}
