#!/usr/bin/env bash
# The test suite: vet, every test under the race detector, the tests of
# wal, queue, index and internal/crashfs it runs scaled down at full size
# without it, the crash suite at full size and a short run of every fuzz
# target (fuzz/ci.sh), and the benchmark harness's own tests plus a quick
# run, so that it cannot rot.
# Long runs: README.md, "Crash safety" and "Performance".
set -euo pipefail
cd "$(dirname "$0")"

# Each step ends with a line "step <name>: <wall> s wall, <cpu> s cpu", so
# that any CI log shows where the time goes: the CPU figure (user + system
# time of every process the step waited for, test binaries and their
# children included) barely moves with the machine's load, the wall one
# does. A step that fails prints its line too, marked failed.
step_name='' step_wall0='' step_cpu0=''
step_times=$(mktemp /tmp/walq-test-times.XXXXXX)
# step ends the step under way, printing its line, and starts the one
# named $1 (none if $1 is empty); $2 is appended to the line.
step() {
	local cpu
	# times prints the shell's own line, then its children's ("1m2.345s
	# 0m0.678s"); it runs here, not in a $(...) subshell, which has none.
	times >"$step_times"
	cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } print t }' "$step_times")
	if [[ -n $step_name ]]; then
		printf 'step %s: %.1f s wall, %.1f s cpu%s\n' "$step_name" \
			"$(awk -v a="$step_wall0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" \
			"$(awk -v a="$step_cpu0" -v b="$cpu" 'BEGIN { print b - a }')" "${2:-}"
	fi
	step_name=$1 step_wall0=$EPOCHREALTIME step_cpu0=$cpu
	part_wall0=$EPOCHREALTIME part_cpu0=$cpu
}
# part prints a line "part <name>: <wall> s wall, <cpu> s cpu" for what
# the step under way did since it or its previous part began, so that a
# step of several parts (vet-platforms' targets) shows each one's cost.
part_wall0='' part_cpu0=''
part() {
	local cpu
	times >"$step_times"
	cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } print t }' "$step_times")
	printf 'part %s: %.1f s wall, %.1f s cpu\n' "$1" \
		"$(awk -v a="$part_wall0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" \
		"$(awk -v a="$part_cpu0" -v b="$cpu" 'BEGIN { print b - a }')"
	part_wall0=$EPOCHREALTIME part_cpu0=$cpu
}
# Steps that mostly wait (on a browser, on redis-server, on timers) run
# in the background beside steps that mostly compile or compute: bg NAME
# DIR CMD... starts one, in its own process group, its output in a file;
# bg_wait NAME waits for it in a step of its own, prints its output and
# fails if it failed; the exit trap ends those still running.
declare -A bg_pid=() bg_log=()
trap 'rc=$?; if ((rc)); then step "" " (failed)"; else step ""; fi
for p in "${bg_pid[@]}"; do kill -- "-$p" 2>/dev/null || true; done
rm -f "$step_times" "${bg_log[@]}"' EXIT
# bg_body runs CMD in DIR and prints its wall and CPU: bash reaps a
# background job as soon as it ends, so its CPU counts in the step under
# way then, not in the one that waits for it.
bg_body() {
	local name=$1 dir=$2 w0=$EPOCHREALTIME rc=0 t
	shift 2
	(cd "$dir" && "$@") || rc=$?
	t=$(mktemp /tmp/walq-bgtimes.XXXXXX)
	times >"$t" # this shell's children: CMD and what it started
	printf '%s ran in the background: %.1f s wall, %s s cpu (in the cpu of the step it ended in)\n' "$name" \
		"$(awk -v a="$w0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" \
		"$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.1f", t }' "$t")"
	rm -f "$t"
	return "$rc"
}
export -f bg_body
bg() {
	bg_log[$1]=$(mktemp /tmp/walq-bg.XXXXXX)
	setsid bash -c 'bg_body "$@"' _ "$@" >"${bg_log[$1]}" 2>&1 &
	bg_pid[$1]=$!
}
bg_wait() {
	local rc=0
	wait "${bg_pid[$1]}" || rc=$?
	unset 'bg_pid[$1]'
	cat "${bg_log[$1]}"
	if ((rc)); then
		echo "$1 failed (exit $rc)" >&2
		exit 1
	fi
}

step vet
go vet ./...

# The platforms the README names: the library, the CLI and their tests
# type-check and vet on each (the crash suite in fuzz/ kills and limits
# processes the unix way, so Windows vets everything else; go vet compiles
# every package that another imports), the CLI, which imports every
# package of the library, compiles and links. bench/, a harness run on
# the machine that measures, vets on it only: its peers' dependencies,
# modernc.org/sqlite above all, cost minutes to compile for each target.
#
# 32-bit Linux is vetted as linux/arm, which stands for linux/386 too (each
# target costs some 120 CPU-s, most of it compiling the standard library
# again): both are 32-bit little-endian Linux, with int and uintptr of 32
# bits and int64 aligned to 4 bytes; no file here is built for one and not
# the other and none is assembly; every syscall and golang.org/x/sys/unix
# name the code uses has the same type on both (Stat_t, Rlimit, Rusage,
# SyncFileRange...; only their padding fields and unused constants
# differ). same_files_32bit checks the part of this that can change with
# a commit: the Go files of this module's packages, tests included, and of
# every dependency outside the standard library and golang.org/x/sys are
# the same on both targets, so a file of ours or a new dependency that
# tells them apart fails here, and linux/386 must then be vetted again.
same_files_32bit() {
	local a
	for a in 386 arm; do
		GOOS=linux GOARCH=$a go list -deps -test -f \
			'{{if not .Standard}}{{.ImportPath}}: {{.GoFiles}} {{.CgoFiles}} {{.SFiles}}{{end}}' ./... |
			grep -v '^golang.org/x/sys/' | sed "s/_$a\([._]\)/_ARCH\1/g" >"$step_times.$a"
	done
	if ! diff "$step_times.386" "$step_times.arm"; then
		echo "linux/386 and linux/arm build different files (above): vet linux/386 again" >&2
		return 1
	fi
	rm -f "$step_times.386" "$step_times.arm"
}
# The targets compile without optimizations or inlining (-N -l), which
# cuts their compiling by a quarter (freebsd/amd64 from an empty cache:
# 119 CPU-s against 157): vet's findings come from the source and the
# types, which the flags do not change, and every package still compiles
# and the CLI links (nothing runs there). redisq-vet uses the same flags,
# to find linux/arm's standard library compiled.
cross_gcflags='all=-N -l'
# The dashboard's browser test, driven in a headless Chromium (it fails
# under CI=true without one), mostly waits on the browser and the page's
# timers (about 100 s of wall for 25 CPU-s): it runs beside vet-platforms.
step vet-platforms
bg browsertest dashboard/browsertest bash -c 'go vet ./... && go test -count=1 -timeout 10m ./...'
same_files_32bit
part same-files-32bit
for target in windows/amd64 darwin/arm64 freebsd/amd64 linux/arm; do
	pkgs=./...
	if [[ $target == windows/* ]]; then
		pkgs=$(go list ./... | grep -v '/fuzz$')
	fi
	# shellcheck disable=SC2086 # pkgs is a list of packages
	GOOS=${target%/*} GOARCH=${target#*/} go vet -gcflags="$cross_gcflags" $pkgs
	GOOS=${target%/*} GOARCH=${target#*/} go build -gcflags="$cross_gcflags" -o /dev/null ./cmd/walq
	part "$target"
done
step browsertest
bg_wait browsertest

# The tests of wal/, queue/, index/ and internal/crashfs/ that run scaled
# down under -race (fewer crash states, seeds, rounds, steps or sweep
# points: raceEnabled in their race*_test.go), named one by one, at full
# size without the race detector; the race step ran the rest of those
# packages.
# (fuzz/ci.sh runs every test of fuzz/ at full size.)
plain_tests=(
	wal:TestPowerLossTwiceOverFullTail wal:TestPowerLossInGroupSpanningRoll
	wal:TestPowerLossRollingTailPastSegmentSize wal:TestTruncateFrontRounds
	wal:TestPowerLossOverZerosAheadOfTail wal:TestPowerLossAfterWitnessAndRoll
	wal:TestPowerLossWrittenDuringFsync
	queue:TestReplayOwnsWhatItKeeps queue:TestAckQueueReplaysAsLive
	queue:TestEncodeRecordMatchesMsgpack queue:TestAppendEntryMatchesMsgpack
	queue:TestOldestEnqueuedAtModel queue:TestSettleRacesExpiry
	queue:TestSortedSettleRacesExpiry queue:TestCloseWaitsForCompaction
	queue:TestSortedReplaysAsLive
	queue:TestSortedHoldsReplayAsLive queue:TestSortedDeadLogFollowsDisk
	wal:TestSalvageRotSweepBeforeTornRoll wal:TestSalvageTornRollSweep
	wal:TestPowerLossInOverlappedTruncation wal:TestPowerLossAtEachTruncationStep
	queue:TestDeliveryBesideSettlesAndCompactions
	wal:TestReadersThroughTruncations queue:TestReadsThroughCompactions
	index:TestAgesInvariants index:TestAgesOfBigLists
	index:TestSortedAgainstNaiveModel index:TestSortedAgainstModel
	index:TestKeySetAgainstMap
	internal/crashfs:TestAppendsAsBefore
)
# The check of the names runs before any test, in step race.
step race
plain_names=() plain_pkgs=()
for t in "${plain_tests[@]}"; do
	# -run passes over a name that matches nothing (a test renamed, say)
	if ! grep -q "^func ${t#*:}(" "${t%%:*}"/*_test.go; then
		echo "step plain: ${t%%:*} has no ${t#*:}" >&2
		exit 1
	fi
	plain_names+=("${t#*:}")
	[[ " ${plain_pkgs[*]} " == *" ./${t%%:*} "* ]] || plain_pkgs+=("./${t%%:*}")
done
# The race step keeps about 1.5 cores of 2 busy (931 CPU-s in 627 s of
# wall in a cold run), so the plain tests (146 CPU-s in 124 s of wall when
# they ran after it) run beside it, in the background, and step plain only
# waits for them.
bg plain . go test -count=1 -timeout 20m "${plain_pkgs[@]}" -run "^($(IFS='|' && echo "${plain_names[*]}"))\$"
go test -race -count=1 -timeout 30m ./...
step plain
bg_wait plain
# The Redis backend, its own module: its tests start their own
# redis-server and, under CI, fail when there is none. They mostly wait
# on the servers and on timers (their own line gives their wall and CPU),
# so they run in the background beside the steps up to redisq-vet: beside
# step race they made it some 170 s longer in a cold run, more than they
# cost fuzz-ci.
bg redisq-race redisq go test -race -count=1 -timeout 30m ./...
step fuzz-ci
./fuzz/ci.sh
step bench
cd bench
go vet ./...
go test -count=1 -timeout 20m ./...
# The harness's quick run keeps less than one core of two busy on
# average (118 CPU-s in 142 s of wall in a cold run): it runs in the
# background beside prom and redisq-vet, which mostly compile. Its
# figures mean nothing here; that it runs every system to the end, and
# that walq's rows report no error (it exits non-zero then), does.
bg bench-quick . go run . -quick -n 2000 -q
# The Prometheus collector, a module of its own (the dashboard's browser
# test, another, ran beside vet-platforms).
step prom
cd "$(git rev-parse --show-toplevel)"
(cd prom && go vet ./... && go test -race -count=1 ./...)
# The Redis backend's vet; 32-bit Linux is vetted as linux/arm, for
# linux/386 too, as in vet-platforms above.
step redisq-vet
cd "$(git rev-parse --show-toplevel)/redisq"
same_files_32bit
go vet ./...
GOOS=linux GOARCH=arm go vet -gcflags="$cross_gcflags" ./...
step bench-quick
bg_wait bench-quick
step redisq-race
bg_wait redisq-race
