#!/usr/bin/env bash
# The test suite: vet, every test under the race detector, the crash suite
# at full size and a short run of every fuzz target (fuzz/ci.sh), and the
# benchmark harness's own tests plus a quick run, so that it cannot rot.
# Long runs: README.md, "Crash safety" and "Performance".
set -euo pipefail
cd "$(dirname "$0")"
go vet ./...

# The platforms the README names: the library, the CLI and their tests
# type-check and vet on each (the crash suite in fuzz/ kills and limits
# processes the unix way, so Windows vets everything else; go vet compiles
# every package that another imports), the CLI, which imports every
# package of the library, compiles and links, and bench/ vets on 32-bit
# arm, where its peers build (one 32-bit target: its peers' dependencies,
# modernc.org/sqlite above all, cost minutes to compile for each).
for target in windows/amd64 darwin/arm64 freebsd/amd64 linux/386 linux/arm; do
	pkgs=./...
	if [[ $target == windows/* ]]; then
		pkgs=$(go list ./... | grep -v '/fuzz$')
	fi
	# shellcheck disable=SC2086 # pkgs is a list of packages
	GOOS=${target%/*} GOARCH=${target#*/} go vet $pkgs
	GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./cmd/walq
done
(cd bench && GOOS=linux GOARCH=arm go vet ./...)

go test -race -count=1 -timeout 30m ./...
./fuzz/ci.sh
# The modules of their own: the Prometheus collector, and the dashboard
# driven in a headless Chromium (it fails under CI=true without one).
(cd prom && go vet ./... && go test -race -count=1 ./...)
(cd dashboard/browsertest && go vet ./... && go test -count=1 -timeout 10m ./...)
cd bench
go vet ./...
go test -count=1 -timeout 20m ./...
go run . -quick -n 2000 -q
# The Redis backend, its own module: its tests start their own
# redis-server and, under CI, fail when there is none.
cd "$(git rev-parse --show-toplevel)/redisq"
go vet ./...
for target in linux/386 linux/arm; do
	GOOS=${target%/*} GOARCH=${target#*/} go vet ./...
done
go test -race -count=1 -timeout 30m ./...
