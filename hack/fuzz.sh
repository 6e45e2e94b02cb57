#!/usr/bin/env bash
# Runs every fuzz target of the module briefly (default 50000 inputs each). The seed
# corpora already run as ordinary tests in `go test`; this explores beyond them.
#   hack/fuzz.sh [FUZZTIME]   (a count such as 50000x, or a duration such as 1m)
# The default is a count of inputs: with a duration, Go 1.26's fuzz coordinator can report
# "context deadline exceeded" as a failure at the deadline with no failing input (a race in
# internal/fuzz, golang/go#75804, fixed in Go 1.27). A count never starts that deadline. For the
# same reason minimizing an input (a new interesting one, or a failing one before it is written to
# testdata/fuzz) is bounded by a count too, which also keeps a short run short: by time, minimizing
# FuzzEncode's large inputs took up to 60 s each.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
fuzztime=${1:-50000x}
found=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  grep -lsq '^func Fuzz' "$dir"/*_test.go || continue
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    found=$((found + 1))
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1000x "$pkg"
  done
done
echo "fuzz: ran $found target(s)"
[ "$found" -gt 0 ] || fail "no fuzz targets found"
