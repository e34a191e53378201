#!/usr/bin/env bash
# vulncheck.sh — govulncheck over every build of this module that is shipped or
# linked into one (.ci/run's gate): 0 reachable vulnerabilities, or exit 1.
#
# Usage (from anywhere in the source tree):
#   GOTOOLCHAIN=go1.27.3 scripts/vulncheck.sh
#
# The database is the Go vulnerability database as the Go module proxy serves it,
# the module golang.org/x/vulndb: its data/osv directory (one OSV file per
# vulnerability) indexed into the layout `govulncheck -db file://DIR` reads (ID/,
# index/) by that module's own cmd/indexdb (`indexdb -vulns data/osv -out DIR`).
# The index is built once per vulndb version into
# ${XDG_CACHE_HOME:-~/.cache}/syncledger/vulndb/VERSION and reused.
#
# The scans, each `govulncheck -db file://DIR -tags TAGS ./...` (symbol level: a
# finding counts only if this module's code can call the vulnerable function):
#   default                              the CLI as `go build` makes it, and every package
#   server                               the server build (nats-server, Prometheus client)
#   disable_grpc_modules,grpcnotrace     the shipped syncledger (README)
#   server,disable_grpc_modules,grpcnotrace  the shipped syncledger-server (README)
#
# Go's own packages are checked at the version of the go command that runs the
# scan: a finding in the standard library is fixed by a newer toolchain (the
# GOTOOLCHAIN that .ci/run and the README export), one in a module by
# `go get MODULE@FIXED-VERSION`.
#
# Settings (environment, all optional):
#   GOVULNCHECK_VERSION  golang.org/x/vuln version (v1.9.0)
#   VULNDB_VERSION       golang.org/x/vulndb version (v0.0.0-20261105234957-e22db6528018)
#   VULNDB_DIR           an indexed database to use instead of building one
#
# It exits non-zero, saying why, if any scan finds a reachable vulnerability or
# cannot run (no tool, no database, a database that is empty or incomplete).
set -euo pipefail

vuln_version=${GOVULNCHECK_VERSION:-v1.9.0}
vulndb_version=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}

log() { echo "vulncheck.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

cd "$(dirname "$0")/.."
goversion=$(go env GOVERSION) || die "the go command does not run (above)"
log "Go $goversion (its standard library is what the scans check), govulncheck $vuln_version, vulndb $vulndb_version"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The tools are installed outside this module's build list (go install
# PKG@VERSION ignores go.mod): neither they nor their dependencies become
# requirements of syncledger.
GOBIN=$work/bin go install "golang.org/x/vuln/cmd/govulncheck@$vuln_version" ||
	die "could not install golang.org/x/vuln/cmd/govulncheck@$vuln_version from the Go module proxy (above)"

# count_json DIR: the number of *.json files directly in DIR.
count_json() { find "$1" -maxdepth 1 -name '*.json' -type f | wc -l; }

db=${VULNDB_DIR:-}
if [[ -z $db ]]; then
	db=${XDG_CACHE_HOME:-$HOME/.cache}/syncledger/vulndb/$vulndb_version
	if [[ ! -f $db/index/vulns.json ]]; then
		# (from $work, outside this module: its go.sum is left as it is)
		src=$(cd "$work" && go mod download -json "golang.org/x/vulndb@$vulndb_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') ||
			die "could not download golang.org/x/vulndb@$vulndb_version from the Go module proxy (above)"
		[[ -n $src && -d $src/data/osv ]] || die "golang.org/x/vulndb@$vulndb_version has no data/osv directory (at '$src')"
		log "indexing $(count_json "$src/data/osv") OSV entries of golang.org/x/vulndb@$vulndb_version into $db"
		GOBIN=$work/bin go install "golang.org/x/vulndb/cmd/indexdb@$vulndb_version" ||
			die "could not install golang.org/x/vulndb/cmd/indexdb@$vulndb_version from the Go module proxy (above)"
		mkdir -p "$(dirname "$db")"
		rm -rf "$db.new"
		"$work/bin/indexdb" -vulns "$src/data/osv" -out "$db.new" || die "indexdb could not index $src/data/osv (above)"
		rm -rf "$db"
		mv "$db.new" "$db"
		want=$(count_json "$src/data/osv")
		have=$(count_json "$db/ID")
		((have == want)) || die "the index at $db holds $have entries, data/osv $want: delete $db and run again"
	fi
fi
# A database that lost its entries would pass every scan: it must hold the
# standard library's and thousands of entries.
[[ -f $db/index/vulns.json && -f $db/index/modules.json && -d $db/ID ]] ||
	die "$db is not an indexed vulnerability database (no index/vulns.json, index/modules.json or ID/): delete it and run again"
entries=$(count_json "$db/ID")
((entries >= 1000)) || die "$db holds only $entries entries: delete it and run again"
grep -q '"path":"stdlib"' "$db/index/modules.json" || die "$db has no entries for the standard library: delete it and run again"
log "database $db: $entries entries"

failed=()
for tags in "" server disable_grpc_modules,grpcnotrace server,disable_grpc_modules,grpcnotrace; do
	echo "--- govulncheck -tags '$tags' ./..."
	out=$work/out.txt
	rc=0
	"$work/bin/govulncheck" -db "file://$db" ${tags:+-tags "$tags"} ./... >"$out" 2>&1 || rc=$?
	cat "$out"
	case $rc in
	0)
		grep -Eq '^(Your code is affected by 0 vulnerabilities\.|No vulnerabilities found\.)$' "$out" ||
			die "govulncheck -tags '$tags' exited 0 without its summary line: it did not scan (above)"
		;;
	3) failed+=("${tags:-default}") ;;
	*) die "govulncheck -tags '$tags' could not run (exit $rc, above)" ;;
	esac
done
if ((${#failed[@]})); then
	die "reachable vulnerabilities (above) in the builds: ${failed[*]}. A standard library one: build with a Go that fixes it (GOTOOLCHAIN in .ci/run and the README); a module's: go get MODULE@FIXED-VERSION"
fi
echo "govulncheck: 0 reachable vulnerabilities in 4 builds (Go $goversion)"
