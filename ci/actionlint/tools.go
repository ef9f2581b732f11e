//go:build tools

// Package tools pins actionlint, which `make lint` builds from this module
// (ci/actionlint.sh) to check .github/workflows; go.mod names its version
// and go.sum the checksums of it and its dependencies.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
