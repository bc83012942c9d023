#!/usr/bin/env bash
# Fuzzes every decoder: each Fuzz target of the module in turn, for a
# bounded time each (the first argument, 60s by default), so that a soak
# run covers everything that reads bytes from the network or a file. A
# finding stops the run and fails it; Go keeps the failing input under the
# package's testdata/fuzz, where it becomes a test case of go test.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-60s}
go list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
	targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for target in $targets; do
		echo "fuzz: $pkg $target for $fuzztime"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
