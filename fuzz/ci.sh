#!/usr/bin/env bash
# The crash and fuzz suite's CI run (fuzz/README.md explains each part):
#  1. every crash test at full size, without the race detector, printing the
#     SUMMARY lines whose figures go in the README (test.sh runs the same
#     tests again, scaled down, under -race);
#  2. every go test -fuzz target for FUZZTIME (default 10s).
# Long runs: fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}

go test -count=1 -timeout 20m -v ./fuzz 2>&1 | tee /tmp/walq-fuzz-ci.log | grep -E '^(--- |ok|FAIL|PASS)|SUMMARY' || true
if ! grep -q '^ok' /tmp/walq-fuzz-ci.log; then
	echo "crash tests failed; the full log is in /tmp/walq-fuzz-ci.log" >&2
	exit 1
fi

targets=(
	./fuzz:FuzzQueueModel
	./fuzz:FuzzSegment
	./fuzz:FuzzSnapshotFile
	./queue:FuzzDecodeRecord
	./queue:FuzzDecodeState
	./recovery:FuzzDecode
	./recovery:FuzzEncode
)
for t in "${targets[@]}"; do
	pkg=${t%%:*} name=${t##*:}
	echo "fuzz $pkg $name for $FUZZTIME"
	go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" 2>&1 | tail -n 3
done
