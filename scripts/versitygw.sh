#!/usr/bin/env bash
# versitygw.sh — run a real S3 server (versitygw, posix backend) on 127.0.0.1 for the
# ledger/s3blob real-server test (TestRealS3), or stop it.
#
# Usage:
#   eval "$(scripts/versitygw.sh)"      # start, wait until it answers, export the test env
#   go test ./ledger/s3blob/ -run TestRealS3
#   scripts/versitygw.sh stop           # stop the server this script started
#
# On start, stdout carries only `export NAME=value` lines, meant for eval:
#   SYNCLEDGER_TEST_S3_ENDPOINT  http://127.0.0.1:<port>  (the endpoint; also printed to stderr)
#   SYNCLEDGER_TEST_S3_BUCKET    the bucket the test uses (it creates it if missing)
#   AWS_ACCESS_KEY_ID            the gateway's root access key
#   AWS_SECRET_ACCESS_KEY        the gateway's root secret key
#   AWS_REGION                   us-east-1
#   VERSITYGW_PID                the server's pid
# Progress and errors go to stderr. The script exits non-zero, and prints no exports,
# if the server cannot be installed or started or does not answer in time: a CI run
# that asked for the real-server test must fail, never skip.
#
# Settings (environment, all optional):
#   VERSITYGW_VERSION     module version to install if versitygw is not found (v1.8.0)
#   VERSITYGW_PORT        TCP port on 127.0.0.1 (7070)
#   VERSITYGW_DIR         state directory: data in $DIR/root, log in $DIR/versitygw.log,
#                         pid in $DIR/versitygw.pid (${TMPDIR:-/tmp}/syncledger-versitygw;
#                         `stop` must see the same value, which start exports)
#   VERSITYGW_ACCESS_KEY  root access key (syncledger)
#   VERSITYGW_SECRET_KEY  root secret key (syncledger-secret)
#   VERSITYGW_TIMEOUT     seconds to wait for the server to answer (30)
#   SYNCLEDGER_TEST_S3_BUCKET  bucket name to export (syncledger-test)
#
# The exact start command (run in the background, stdout/stderr to the log):
#   ROOT_ACCESS_KEY=$VERSITYGW_ACCESS_KEY ROOT_SECRET_KEY=$VERSITYGW_SECRET_KEY \
#     versitygw --port 127.0.0.1:$VERSITYGW_PORT --quiet posix $VERSITYGW_DIR/root
# versitygw is installed, if missing, with
#   go install github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION
set -euo pipefail

version=${VERSITYGW_VERSION:-v1.8.0}
port=${VERSITYGW_PORT:-7070}
access=${VERSITYGW_ACCESS_KEY:-syncledger}
secret=${VERSITYGW_SECRET_KEY:-syncledger-secret}
timeout=${VERSITYGW_TIMEOUT:-30}
bucket=${SYNCLEDGER_TEST_S3_BUCKET:-syncledger-test}
endpoint="http://127.0.0.1:${port}"

log() { echo "versitygw.sh: $*" >&2; }
die() { log "$*"; exit 1; }

dir=${VERSITYGW_DIR:-${TMPDIR:-/tmp}/syncledger-versitygw}

if [[ ${1:-start} == stop ]]; then
	[[ -f $dir/versitygw.pid ]] || die "no $dir/versitygw.pid (set VERSITYGW_DIR as when starting)"
	pid=$(cat "$dir/versitygw.pid")
	if kill "$pid" 2>/dev/null; then
		log "stopped pid $pid"
	else
		log "pid $pid was not running"
	fi
	rm -f "$dir/versitygw.pid"
	exit 0
fi
[[ ${1:-start} == start ]] || die "usage: $0 [start|stop]"

# Find or install the binary.
bin=$(command -v versitygw || true)
if [[ -z $bin ]]; then
	gobin=$(go env GOBIN)
	[[ -n $gobin ]] || gobin="$(go env GOPATH)/bin"
	bin="$gobin/versitygw"
	if [[ ! -x $bin ]]; then
		log "installing github.com/versity/versitygw/cmd/versitygw@$version (takes a minute or two)"
		# Outside the repo, so the project's go.mod is not consulted or changed.
		(cd / && GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@${version}") >&2 ||
			die "go install versitygw@$version failed"
	fi
fi

# Refuse to start on a port that already answers: the test would talk to whatever
# holds it.
if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
	die "127.0.0.1:${port} is already in use (set VERSITYGW_PORT)"
fi

mkdir -p "$dir/root"
logfile="$dir/versitygw.log"

log "starting $bin on $endpoint, data in $dir/root, log in $logfile"
ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
	nohup "$bin" --port "127.0.0.1:${port}" --quiet posix "$dir/root" >"$logfile" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$dir/versitygw.pid"

# Ready when it answers HTTP: an unsigned GET / gets 403 AccessDenied from S3.
deadline=$((SECONDS + timeout))
until code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$endpoint/") && [[ $code != 000 ]]; do
	if ! kill -0 "$pid" 2>/dev/null; then
		cat "$logfile" >&2 || true
		die "versitygw exited during startup"
	fi
	if ((SECONDS >= deadline)); then
		kill "$pid" 2>/dev/null || true
		cat "$logfile" >&2 || true
		die "versitygw did not answer on $endpoint within ${timeout}s"
	fi
	sleep 0.2
done
log "ready: $endpoint (HTTP $code without credentials), pid $pid"

cat <<EOF
export SYNCLEDGER_TEST_S3_ENDPOINT=$endpoint
export SYNCLEDGER_TEST_S3_BUCKET=$bucket
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_REGION=us-east-1
export VERSITYGW_PID=$pid
export VERSITYGW_DIR=$dir
EOF
