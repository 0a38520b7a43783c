#!/usr/bin/env bash
# The test suite: vet, every test under the race detector, the crash suite
# at full size and a short run of every fuzz target (fuzz/ci.sh), and the
# benchmark harness's own tests plus a quick run, so that it cannot rot.
# Long runs: README.md, "Crash safety" and "Performance".
#
# After the first vet, the steps run in two lanes at once, each lane one
# step after another: the race tests wait on kill -9 cycles, leases and
# child processes for much of their time, which the other lane's compiling
# and vetting fills. A step's output goes to a file and is printed whole,
# with its time, when the step ends; a lane stops at its first failed step,
# and the script fails when either lane did (each lane's status is waited
# for and checked).
set -euo pipefail
cd "$(dirname "$0")"
go vet ./...

logs=$(mktemp -d /tmp/walq-test.XXXXXX)

# The steps below are called from step, in a list (&&, ||) where bash
# ignores set -e, so each chains its commands with && or returns on the
# first failure itself.

# step NAME CMD...: runs CMD with its output in $logs/NAME.log, then
# prints that log under one line with the step's outcome and time (under
# a lock, so that two lanes' logs never interleave); returns CMD's status.
step() {
	local name=$1 rc=0 start=$SECONDS
	shift
	"$@" >"$logs/$name.log" 2>&1 || rc=$?
	local outcome="ok"
	if ((rc != 0)); then
		outcome="FAILED (exit $rc)"
	fi
	(
		flock 9
		echo "=== $name: $outcome in $((SECONDS - start)) s"
		cat "$logs/$name.log"
	) 9>"$logs/print.lock"
	return "$rc"
}

# The platforms the README names: the library, the CLI and their tests
# type-check and vet on each (the crash suite in fuzz/ kills and limits
# processes the unix way, so Windows vets everything else; go vet compiles
# every package that another imports), the CLI, which imports every
# package of the library, compiles and links, and bench/ vets where its
# peers build.
cross_vet() {
	local target pkgs
	for target in windows/amd64 darwin/arm64 freebsd/amd64 linux/386 linux/arm; do
		pkgs=./...
		if [[ $target == windows/* ]]; then
			pkgs=$(go list ./... | grep -v '/fuzz$')
		fi
		echo "vet $target"
		# shellcheck disable=SC2086 # pkgs is a list of packages
		GOOS=${target%/*} GOARCH=${target#*/} go vet $pkgs || return
		GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./cmd/walq || return
	done
	for target in linux/386 linux/arm; do
		(cd bench && GOOS=${target%/*} GOARCH=${target#*/} go vet ./...) || return
	done
}

# The modules of their own: the Prometheus collector, and the dashboard
# driven in a headless Chromium (it fails under CI=true without one).
prom() { (cd prom && go vet ./... && go test -race -count=1 ./...); }
browser() { (cd dashboard/browsertest && go vet ./... && go test -count=1 -timeout 10m ./...); }

bench() {
	(cd bench && go vet ./... && go test -count=1 -timeout 20m ./... && go run . -quick -n 2000 -q)
}

# The Redis backend, its own module: its tests start their own
# redis-server and, under CI, fail when there is none.
redisq() {
	(cd redisq && go vet ./... &&
		GOOS=linux GOARCH=386 go vet ./... && GOOS=linux GOARCH=arm go vet ./... &&
		go test -race -count=1 -timeout 30m ./...)
}

lane1() {
	step race go test -race -count=1 -timeout 30m ./... &&
		step prom prom &&
		step browser browser &&
		step bench bench
}
lane2() {
	step cross-vet cross_vet &&
		step crash-and-fuzz ./fuzz/ci.sh &&
		step redisq redisq
}
lane1 &
pid1=$!
lane2 &
pid2=$!
failed=0
wait "$pid1" || failed=1
wait "$pid2" || failed=1
if ((failed)); then
	echo "test.sh: a step failed (its log is printed above; all logs are in $logs)" >&2
	exit 1
fi
rm -rf "$logs"
