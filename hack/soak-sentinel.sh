#!/usr/bin/env bash
# The Sentinel soak (test/soak TestSentinelSoak, build tag soak): the lock on a master, two
# replicas and three sentinels (real redis-server and redis-sentinel), --min-replicas 2,
# three lockwrap loops contending for one key, a seeded plan of failovers, frozen servers,
# paused lockwraps and killed jobs, then the external checker. No cluster.
#
#   hack/soak-sentinel.sh   DURATION (default 20m), SEED (default: drawn and printed),
#                           SOAK_MIN_OCCURRENCES (default 300)
#   make soak-sentinel      SENTINEL_DURATION (default 20m; DURATION is the cluster soak's), SEED
#
# Output in SOAK_OUT (default _out/soak-sentinel/<time>-seed<SEED>): result.txt /
# result.json, history.json and, when a check failed, history.html.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

SEED=${SEED:-$((RANDOM * 32768 + RANDOM))}
DURATION=${DURATION:-20m}
out=${SOAK_OUT:-$REPO_ROOT/_out/soak-sentinel/$(date -u +%Y%m%dT%H%M%SZ)-seed$SEED}
mkdir -p "$out/bin"
CGO_ENABLED=0 go build -trimpath -o "$out/bin/lockwrap" ./cmd/lockwrap
CGO_ENABLED=0 go build -trimpath -o "$out/bin/e2e-job" ./test/e2e/jobimage
log "soak (Sentinel): DURATION=$DURATION SEED=$SEED, output in $out"
SOAK_DURATION=$DURATION SOAK_SEED=$SEED SOAK_OUT=$out SOAK_LOCKWRAP=$out/bin/lockwrap SOAK_JOB=$out/bin/e2e-job \
  SOAK_MIN_OCCURRENCES=${SOAK_MIN_OCCURRENCES:-300} \
  go test -tags soak -count=1 -timeout 4h -v -run '^TestSentinelSoak$' ./test/soak/ 2>&1 | tee "$out/soak.log" || {
  if [ -f "$out/result.txt" ]; then cat "$out/result.txt" >&2; fi
  log "Sentinel soak FAILED (DURATION=$DURATION SEED=$SEED); its errors, from $out/soak.log:"
  grep -E '^\s+[a-z_]+\.go:[0-9]+: ' "$out/soak.log" | grep -v -E '\.go:[0-9]+: (soak:|redistest:)' | cut -c1-300 | tail -n 12 >&2 || true
  exit 1
}
