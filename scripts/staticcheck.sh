#!/usr/bin/env bash
# staticcheck.sh — staticcheck (honnef.co/go/tools) over this module, tests
# included, in every build configuration its code has (.ci/run's gate): 0
# findings, or exit 1.
#
# Usage (from anywhere in the source tree):
#   GOTOOLCHAIN=go1.27.3 scripts/staticcheck.sh
#
# One run over a build matrix (staticcheck -matrix): the default build, the
# server build (-tags server), the fault-injection build (-tags failpoints), and
# the default build for Windows (every !unix and !linux file) and macOS (unix
# but not linux). A finding in only some builds names them; code that only
# some builds use (serve's exec in the default build, its run in the server
# build) is unused only if no build uses it. The server build for Windows and
# macOS would add no file these do not check.
#
# staticcheck is installed with `go install PKG@VERSION`, outside this module's
# build list: it does not become a requirement of syncledger, nor move the
# versions of the modules it shares with it (golang.org/x/tools, x/mod...).
#
# Settings (environment, optional):
#   STATICCHECK_VERSION  honnef.co/go/tools version (v0.8.2)
#
# A finding is fixed in the code. A false positive gets
# `//lint:ignore CHECK why it is one` on its line, never a blanket exclusion.
set -euo pipefail

version=${STATICCHECK_VERSION:-v0.8.2}

log() { echo "staticcheck.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

cd "$(dirname "$0")/.."
goversion=$(go env GOVERSION) || die "the go command does not run (above)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOBIN=$work/bin go install "honnef.co/go/tools/cmd/staticcheck@$version" ||
	die "could not install honnef.co/go/tools/cmd/staticcheck@$version from the Go module proxy (above)"
log "$("$work/bin/staticcheck" -version) on Go $goversion"

matrix='default:
server: -tags server
failpoints: -tags failpoints
windows: GOOS=windows
darwin: GOOS=darwin'
echo "build matrix:"
sed 's/^/  /' <<<"$matrix"

# Exit codes: 0 no findings; 1 findings, or an error loading the packages or
# the tool; 2 bad flags or matrix. Only 0 with nothing printed passes.
rc=0
"$work/bin/staticcheck" -matrix ./... <<<"$matrix" >"$work/out.txt" 2>&1 || rc=$?
cat "$work/out.txt"
if ((rc != 0)); then
	die "staticcheck failed (exit $rc): fix each finding above in the code (a false positive gets //lint:ignore CHECK reason on its line); an error that is no finding means it could not check the module"
fi
[[ ! -s $work/out.txt ]] || die "staticcheck exited 0 but printed the above"
echo "staticcheck: 0 findings in $(wc -l <<<"$matrix") builds (Go $goversion)"
