# kthena.sh - sourced by ci/kind/up.sh: which Kthena to install, and the rule
# that chart, router image and runtime image come from one Kthena version.
#
# One variable chooses it (docs/kind.md, "The version rule"):
#
#   KTHENA_VERSION=vX.Y.Z   a release: the chart oci://ghcr.io/volcano-sh/charts/kthena
#                           at vX.Y.Z and the images tagged vX.Y.Z (default:
#                           KTHENA_RELEASE of ci/kind/versions.env)
#   KTHENA_DIR=/checkout    a checkout (main, a branch, a tag): its chart, and
#                           the router and runtime built from it; its version
#                           is its git tag, else main (KTHENA_VERSION overrides)
#
# KTHENA_TAG, KTHENA_CHART and KTHENA_CHART_VERSION override single parts
# for experiments; a combination known not to work is refused here, before
# anything is installed, with the reason.
#
# Kthena's generations, as read in its source: up to v1.0.0 the router knows
# ModelServer and ModelRoute only; main's router also watches
# ExternalModelProvider (cmd/kthena-router/app/controller.go waits for its
# informer) and main's chart installs that CRD and its RBAC, starts the router
# with --metrics-port and --expose-metrics-on-router-port (flags v1.0.0's
# router does not have) and honours networking.kthenaRouter.service.type (the
# v1.0.0 chart renders a LoadBalancer Service whatever it says).
#
# Sets: kthena_version, chart, chart_version (empty for a chart folder),
# image_tag, build_dir (the checkout to build, or empty), chart_generation.

EMP_CRD=charts/networking/crds/networking.serving.volcano.sh_externalmodelproviders.yaml
EMP_CONTROLLER=pkg/kthena-router/controller/externalmodelprovider_controller.go

refuse() {
  say "refused: $*"
  exit 2
}

# generation VERSION_OR_TAG: v1 (releases up to v1.0.0), main (main and the
# releases after it), or nothing when the name tells nothing.
generation() {
  case $1 in
    main | latest | 0.0.0-main-*) echo main ;;
    v[0-9]*) if version_le "$1" v1.0.0; then echo v1; else echo main; fi ;;
  esac
}

# The generation of a chart folder: main when it installs ExternalModelProvider.
folder_generation() {
  if [ -f "$1/$EMP_CRD" ]; then echo main; else echo v1; fi
}

# The version a checkout holds: KTHENA_VERSION if set, else its exact git
# tag, else main when its router has the ExternalModelProvider controller.
checkout_version() {
  if [ -n "${KTHENA_VERSION:-}" ]; then
    echo "$KTHENA_VERSION"
    return
  fi
  tag=$(git -C "$1" describe --tags --exact-match 2>/dev/null || true)
  case $tag in
    v[0-9]*) echo "$tag"; return ;;
  esac
  if [ -f "$1/$EMP_CONTROLLER" ]; then
    echo main
  else
    say "refused: KTHENA_DIR=$1 is not at a release tag and has no ExternalModelProvider controller, so it" \
      "is neither main nor a known release: set KTHENA_VERSION to the release it holds"
    return 1
  fi
}

plan_kthena() {
  if [ -n "${KTHENA_DIR:-}" ]; then
    [ -d "$KTHENA_DIR/charts/kthena" ] || refuse "KTHENA_DIR=$KTHENA_DIR has no charts/kthena: is it a Kthena checkout?"
    build_dir=$KTHENA_DIR
    kthena_version=$(checkout_version "$KTHENA_DIR") || exit 2
    image_tag=${KTHENA_TAG:-kvengine}
    # what is built is what the source holds, whatever it is called
    if [ -f "$KTHENA_DIR/$EMP_CONTROLLER" ]; then image_generation=main; else image_generation=v1; fi
    if [ "$(generation "$kthena_version")" != "$image_generation" ]; then
      refuse "KTHENA_VERSION=$kthena_version, but the router in KTHENA_DIR=$KTHENA_DIR is of Kthena's" \
        "$image_generation generation (ExternalModelProvider controller $([ "$image_generation" = main ] &&
          echo present || echo absent))"
    fi
    chart=${KTHENA_CHART:-$KTHENA_DIR/charts/kthena}
  else
    build_dir=
    kthena_version=${KTHENA_VERSION:-$KTHENA_RELEASE}
    case $kthena_version in
      main) refuse "KTHENA_VERSION=main: main has no published chart; give a checkout of it as KTHENA_DIR" ;;
      v[0-9]*) ;;
      *) refuse "KTHENA_VERSION=$kthena_version is not a version: name a release (vX.Y.Z), or give a checkout as" \
        "KTHENA_DIR. An image tag such as latest moves with Kthena's main branch, and no chart moves with it" ;;
    esac
    image_tag=${KTHENA_TAG:-$kthena_version}
    image_generation=$(generation "$image_tag")
    chart=${KTHENA_CHART:-oci://ghcr.io/volcano-sh/charts/kthena}
  fi

  case $chart in
    oci://*)
      chart_version=${KTHENA_CHART_VERSION:-$kthena_version}
      chart_generation=$(generation "$chart_version") ;;
    *)
      chart_version=
      [ -d "$chart" ] || refuse "KTHENA_CHART=$chart is neither an oci:// reference nor a chart folder"
      chart_generation=$(folder_generation "$chart") ;;
  esac
  chart_name=${chart_version:-$chart}

  if [ "$image_tag" = latest ]; then
    if [ "$chart_generation" = v1 ]; then
      refuse "chart $chart_name with image latest: latest is built from Kthena's main, whose router waits for" \
        "ExternalModelProvider, which this chart does not install (no CRD, no RBAC), so it never becomes Ready"
    fi
    refuse "image latest names no fixed build (it moves with Kthena's main): build main from a checkout" \
      "(KTHENA_DIR) so that the chart and the images are the same code"
  fi
  if [ "$image_generation" = main ] && [ "$chart_generation" = v1 ]; then
    refuse "a main router and runtime ($image_tag, Kthena $kthena_version) with the released chart $chart_name: the" \
      "router waits for ExternalModelProvider, which this chart does not install, so it never becomes Ready"
  fi
  if [ "$image_generation" = v1 ] && [ "$chart_generation" = main ]; then
    refuse "router $image_tag with the chart of Kthena's main ($chart_name): that chart starts the router with" \
      "--metrics-port and --expose-metrics-on-router-port, which a $image_tag router does not know; it exits at start"
  fi
  if [ -z "$image_generation" ] || [ -z "$chart_generation" ]; then
    refuse "cannot tell which Kthena version image $image_tag or chart $chart_name is: name a release" \
      "(KTHENA_VERSION) or give a checkout (KTHENA_DIR)"
  fi
  if [ -z "$build_dir" ] && [ -n "$chart_version" ] && [ "$chart_version" != "$image_tag" ]; then
    refuse "chart $chart_version with images $image_tag: the chart, the router and the runtime come from one" \
      "Kthena version (KTHENA_VERSION)"
  fi
}
