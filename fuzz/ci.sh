#!/usr/bin/env bash
# The crash and fuzz suite's CI run (fuzz/README.md explains each part):
#  1. every crash test at full size, without the race detector, printing the
#     SUMMARY lines whose figures go in the README (test.sh runs the same
#     tests again, scaled down, under -race);
#  2. every go test -fuzz target, for a fixed number of executions sized
#     to take a few seconds each (FUZZTIME overrides it, e.g. FUZZTIME=10m;
#     a count has no wall-clock deadline, so a slow machine cannot fail a
#     run that found nothing).
# Long runs: fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# The crash tests run one at a time in one test process (and its
# children), for some 350 s of wall in a cold run, while the fuzz targets
# below mostly compile (every package again, instrumented for coverage)
# and then fuzz: the two run beside each other, the crash tests in the
# background, in a process group of their own that the exit trap ends if
# a fuzz target fails first. Their lines print after the targets'; their
# log is kept only when they failed.
crash_log=$(mktemp /tmp/walq-fuzz-ci.XXXXXX) crash_keep=''
setsid go test -count=1 -timeout 20m -v ./fuzz >"$crash_log" 2>&1 &
crash_pid=$!
trap 'kill -- "-$crash_pid" 2>/dev/null || true; [[ -n $crash_keep ]] || rm -f "$crash_log"' EXIT

# target:executions
targets=(
	./fuzz:FuzzQueueModel:3000x
	./fuzz:FuzzSortedModel:2000x
	./fuzz:FuzzSegment:10000x
	./fuzz:FuzzSnapshotFile:20000x
	./queue:FuzzDecodeRecord:40000x
	./queue:FuzzDecodeState:30000x
	./recovery:FuzzDecode:50000x
	./recovery:FuzzEncode:50000x
	./wal:FuzzDecodeEntry:50000x
)
for t in "${targets[@]}"; do
	IFS=: read -r pkg name count <<<"$t"
	budget=${FUZZTIME:-$count}
	echo "fuzz $pkg $name for $budget"
	log=/tmp/walq-fuzz-$name.log
	if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" >"$log" 2>&1; then
		grep -v '^fuzz: elapsed' "$log" >&2
		echo "fuzz target $name failed; a failing input is kept under $pkg/testdata/fuzz/$name" >&2
		exit 1
	fi
	tail -n 1 "$log"
done

crash_rc=0
wait "$crash_pid" || crash_rc=$?
grep -E '^(--- |ok|FAIL|PASS)|SUMMARY' "$crash_log" || true
if ((crash_rc)) || ! grep -q '^ok' "$crash_log"; then
	# CI shows only this output: print every line but the passing ones.
	grep -v -E '^(=== (RUN|PAUSE|CONT)|\s*--- PASS)' "$crash_log" >&2
	echo "crash tests failed; the full log is in $crash_log" >&2
	crash_keep=1
	exit 1
fi
