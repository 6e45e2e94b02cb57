#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time each (default 10s). The seed
# corpora already run as ordinary tests in `go test`; this explores beyond them.
#   hack/fuzz.sh [FUZZTIME]
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
fuzztime=${1:-10s}
found=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  grep -lsq '^func Fuzz' "$dir"/*_test.go || continue
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    found=$((found + 1))
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
echo "fuzz: ran $found target(s)"
[ "$found" -gt 0 ] || fail "no fuzz targets found"
