#!/usr/bin/env bash
# model/check.sh — check the Promela model of syncledger's sync protocol
# (model/syncledger.pml) with spin. Installs nothing: needs spin and gcc on PATH
# (Debian: apt-get install -y spin).
#
#   1. exhaustive search of the correct model in each configuration below, for
#      assertion violations (I1, I2, I3, I8, the log's chain) and invalid end
#      states (deadlocks); prints the states explored; fails on any error or
#      on an incomplete search (depth or memory bound hit);
#   2. reachability probes: the search reaches each listed situation (so the
#      invariants are not checked vacuously);
#   3. the broken variant (-DBROKEN_SCOPED_HWM, swamp-club#3193: the HWM taken
#      from the log's head after a scoped sync) must fail with a trail; the
#      trail's last steps are printed with `spin -t`.
#
# Exit status 0 only if all three hold. About 2 minutes on 2 cores, < 1 GB.
#
# Environment:
#   SYNCLEDGER_SPIN_LONG=1   also run the larger configurations (about 12 more
#                            minutes; see RELIABILITY.md, "Model check")
#   SYNCLEDGER_SPIN_KEEP=1   keep the work directory (pan sources, the trail)
#   SYNCLEDGER_SPIN_WORKDIR  use this work directory instead of a new temp one
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model=syncledger.pml

for tool in spin gcc; do
	if ! command -v "$tool" >/dev/null; then
		echo "model/check.sh: $tool not found (Debian: apt-get install -y spin gcc)" >&2
		exit 2
	fi
done

work=${SYNCLEDGER_SPIN_WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/syncledger-spin.XXXXXX")}
mkdir -p "$work"
if [[ -z ${SYNCLEDGER_SPIN_KEEP:-} && -z ${SYNCLEDGER_SPIN_WORKDIR:-} ]]; then
	trap 'rm -rf "$work"' EXIT
fi
cp "$here/$model" "$work/"
cd "$work"
echo "spin: $(spin -V 2>&1 | head -n1); work directory $work"

# Exhaustive configurations: name | spin defines | description.
configs=(
	"A|-DNH=2 -DNP=2 -DMAXC=4 -DMAXK=2|2 hosts x 2 partitions, up to 4 commits of 1-2 partitions (up to 8 events)"
	"B|-DNH=3 -DNP=3 -DMAXC=2 -DMAXK=2|3 hosts x 3 partitions, up to 2 commits of 1-2 partitions (up to 4 events)"
)
if [[ -n ${SYNCLEDGER_SPIN_LONG:-} ]]; then
	configs+=(
		"C|-DNH=2 -DNP=2 -DMAXC=5 -DMAXK=2|2 hosts x 2 partitions, up to 5 commits of 1-2 partitions (up to 10 events)"
		"D|-DNH=2 -DNP=3 -DMAXC=3 -DMAXK=3|2 hosts x 3 partitions, up to 3 commits of 1-3 partitions (up to 9 events)"
		"E|-DNH=3 -DNP=2 -DMAXC=3 -DMAXK=2|3 hosts x 2 partitions, up to 3 commits of 1-2 partitions (up to 6 events)"
	)
fi

# Reachability probes (REACH in the model), checked in a small configuration.
probe_defs="-DNH=2 -DNP=2 -DMAXC=3 -DMAXK=2"
probes=(
	"1|a full sync skips an event applied before (scoped sync, catch-up or own commit) and counts it"
	"2|a Ready persisted with processed seqs left above its HWM (HWM held before a gap or a commit's missing part)"
	"3|a full sync reads up to a head inside an atomic batch (a commit's last part not stored yet)"
	"4|an own commit recorded without moving the HWM (its seqs do not start at HWM+1)"
	"5|an own commit recorded and the HWM moved over it (its seqs start at HWM+1)"
	"6|a commit appended on a retry after a chain conflict and a scoped catch-up"
	"7|a crash after a Ready's files were written and before its state was persisted"
	"8|a sync rewrites a file left newer than the marks by an interrupted apply"
	"9|an event applied over content already in the cache (interrupted apply or unrecorded own commit)"
	"10|a scoped sync reads a commit's first part before its last part is stored"
	"11|every host converges after the maximum number of events (MAXC commits of MAXK partitions)"
)

failed=0
summary=()

# pan prints "  523053 states, stored" etc.; pick one figure.
figure() { sed -n "s/^ *\([0-9.e+]*\) $1.*/\1/p" "$2" | head -n1; }

run_exhaustive() {
	local name=$1 defs=$2 desc=$3 dir="exhaustive-$1"
	rm -rf "$dir" && mkdir "$dir" && cp "$model" "$dir/"
	echo
	echo "=== spin $name: $desc"
	echo "    spin -a $defs $model"
	(
		cd "$dir"
		# shellcheck disable=SC2086 # defs are separate words on purpose
		spin -a $defs "$model" >spin.out 2>&1 || { cat spin.out; exit 1; }
		gcc -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=4096 -o pan pan.c
		./pan -m200000 -w24 >pan.out 2>&1 || true
	) || { echo "spin $name: could not build the verifier" >&2; failed=1; return; }
	local out="$dir/pan.out"
	sed -n '/^State-vector/,/total actual memory usage/p' "$out" | grep -vE '^\s*$'
	grep -E '^pan: elapsed' "$out" || true
	local errors stored matched trans
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -n1)
	stored=$(figure 'states, stored' "$out")
	matched=$(figure 'states, matched' "$out")
	trans=$(figure 'transitions' "$out")
	if [[ $errors != 0 ]] || grep -qE 'Search not completed|max search depth too small|reached -DMEMLIM|out of memory' "$out"; then
		echo "spin $name: FAILED (errors: ${errors:-?}, or the search was not complete)" >&2
		grep -E 'violated|Search not completed|max search depth|MEMLIM|invalid end state' "$out" >&2 || true
		if [[ -f $dir/$model.trail ]]; then
			# shellcheck disable=SC2086
			(cd "$dir" && spin -t -T $defs "$model" | grep -E 'VIOLATION|^ *(host|  log|workload|every|BROKEN)' | tail -n 40) >&2 || true
		fi
		failed=1
		summary+=("spin $name: FAILED")
		return
	fi
	local secs
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$out")
	echo "spin $name: 0 errors, exhaustive: $stored states explored (stored), $matched revisited, $trans transitions, ${secs}s"
	summary+=("spin $name ($desc): 0 errors, $stored states, $trans transitions, ${secs}s")
}

for c in "${configs[@]}"; do
	IFS='|' read -r name defs desc <<<"$c"
	run_exhaustive "$name" "$defs" "$desc"
done

echo
echo "=== reachability probes ($probe_defs)"
rm -rf probes && mkdir probes && cp "$model" probes/
reached=0
for p in "${probes[@]}"; do
	IFS='|' read -r n desc <<<"$p"
	(
		cd probes
		# shellcheck disable=SC2086
		spin -a $probe_defs -DPROBE="$n" "$model" >spin.out 2>&1 || { cat spin.out; exit 1; }
		gcc -O0 -w -DSAFETY -DCOLLAPSE -o pan pan.c
		./pan -m200000 >"pan.$n.out" 2>&1 || true
	) || { echo "probe $n: could not build" >&2; failed=1; continue; }
	if grep -q "assertion violated ($n!=$n)" "probes/pan.$n.out" && grep -q 'errors: 1' "probes/pan.$n.out"; then
		echo "probe $n reached: $desc"
		reached=$((reached + 1))
	else
		echo "probe $n NOT reached: $desc" >&2
		grep -E 'errors:|violated' "probes/pan.$n.out" >&2 || true
		failed=1
	fi
	rm -f "probes/$model.trail"
done
summary+=("probes: $reached/${#probes[@]} situations reached")

echo
# Configuration A restricted to one-partition commits (a subset of A's
# behaviours): the shortest counterexample is then #3193's own story rather than
# one that arms the HWM in the middle of an atomic batch.
broken_defs="-DNH=2 -DNP=2 -DMAXC=4 -DMAXK=1 -DBROKEN_SCOPED_HWM"
echo "=== broken variant: $broken_defs (swamp-club#3193), must fail"
rm -rf broken && mkdir broken && cp "$model" broken/
(
	cd broken
	# shellcheck disable=SC2086
	spin -a $broken_defs "$model" >spin.out 2>&1 || { cat spin.out; exit 1; }
	# Breadth-first: the shortest counterexample.
	gcc -O0 -w -DSAFETY -DBFS -DMEMLIM=4096 -o pan pan.c
	./pan >pan.out 2>&1 || true
) || { echo "broken variant: could not build" >&2; failed=1; }
berrors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' broken/pan.out 2>/dev/null | head -n1 || true)
if [[ -s broken/$model.trail ]]; then
	# shellcheck disable=SC2086
	(cd broken && spin -t -T $broken_defs "$model") >broken/trail.txt 2>&1 || true
fi
# The counterexample must be #3193's: the HWM armed, then I2 broken.
if [[ ${berrors:-0} -ge 1 && -s broken/$model.trail ]] && grep -q 'assertion violated' broken/pan.out &&
	grep -q '^BROKEN: host' broken/trail.txt && grep -q 'VIOLATION: *I2' broken/trail.txt; then
	grep -E 'assertion violated|errors:' broken/pan.out
	if [[ -z ${SYNCLEDGER_SPIN_KEEP:-} && -z ${SYNCLEDGER_SPIN_WORKDIR:-} ]]; then
		echo "trail written: $work/broken/$model.trail (removed on exit; SYNCLEDGER_SPIN_KEEP=1 keeps it)"
	else
		echo "trail written: $work/broken/$model.trail"
	fi
	echo "--- its last steps (spin -t -T $broken_defs $model):"
	grep -E 'VIOLATION|^ *(host|  log|workload|every|BROKEN)|^spin: (trail|.*assertion)' broken/trail.txt | tail -n 20
	steps=$(sed -n 's/^spin: trail ends after \([0-9]*\) steps.*/\1/p' broken/trail.txt)
	ops=$(grep -cE '^host [0-9]+:' broken/trail.txt || true)
	inv=$(grep -o 'VIOLATION: *[^ ].*' broken/trail.txt | head -n1 | sed 's/VIOLATION: *//; s/ *$//')
	echo "broken variant: counterexample found (${inv:-assertion}), trail of $ops host operations (${steps:-?} spin steps)"
	summary+=("broken variant: counterexample found (${inv:-assertion}), trail of $ops host operations (${steps:-?} spin steps)")
else
	echo "broken variant: no #3193 counterexample (errors: ${berrors:-?}; an I2 violation after the HWM is armed is required)" >&2
	grep -E 'VIOLATION|^BROKEN' broken/trail.txt >&2 2>/dev/null || true
	failed=1
	summary+=("broken variant: NOT caught")
fi

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
if ((failed)); then
	echo "model check: FAILED" >&2
	exit 1
fi
echo "model check: OK"
