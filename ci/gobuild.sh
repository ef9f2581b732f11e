# ci/gobuild.sh - what the project's Go builds (ci/kthena/build.sh, ci/llmd/build.sh,
# ci/cluster/build.sh, ci/cluster/node-build.sh) share, sourced by them: Go from PATH only
# (GOTOOLCHAIN=local, never a downloaded toolchain), the default module and
# build caches, one way to say what is wrong, and the one split between a
# build that failed (exit 1) and a machine that cannot build (exit 3: no Go,
# a Go too old, the module proxy unreachable).
#
# The sourcing script sets `who` (the prefix of its messages) first.

export GOTOOLCHAIN=local

say() { echo "$who: $*" >&2; }
infra() {
  say "$*"
  exit 3
}

command -v go >/dev/null 2>&1 || infra "no Go on PATH: install Go (https://go.dev/dl/, or Debian's golang-go if recent enough)"

# The Go a go.mod asks for (its `go` line).
go_line() { sed -n 's/^go \([0-9.]*\).*/\1/p' "$1" | head -n 1; }
go_have=$(go env GOVERSION | sed 's/^go//')
need_go() { # need_go VERSION WHAT
  [ -n "$1" ] || return 0
  lowest=$(printf '%s\n%s\n' "$1" "$go_have" | sort -V | head -n 1)
  [ "$lowest" = "$1" ] || infra "$2 needs Go $1 or newer; go on PATH is $go_have: install a newer Go"
}

# A fingerprint of the contents of every file a build reads (tests aside).
fingerprint() {
  find "$@" -type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name '*.sh' \) ! -name '*_test.go' \
    -exec sha256sum {} + 2>/dev/null | LC_ALL=C sort -k 2 | sha256sum | cut -c1-16
}

# go "$@" (output kept for the log), an unreachable proxy being an
# infrastructure error and any other failure a build failure.
run_go() {
  if ! log=$("$@" 2>&1); then
    printf '%s\n' "$log" >&2
    case "$log" in
      *"dial tcp"* | *"no such host"* | *"i/o timeout"* | *"connection refused"* | *"TLS handshake"* | \
        *"403 Forbidden"* | *"404 Not Found"* | *"410 Gone"* | *"unrecognized import path"*)
        infra "the Go module proxy ($(go env GOPROXY)) could not serve a module (above): check the network and GOPROXY" ;;
    esac
    say "'$*' failed (above)"
    exit 1
  fi
}
