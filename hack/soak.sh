#!/usr/bin/env bash
# The chaos soak of issue 14 on the local cluster (test/soak, build tag soak):
#
#   hack/soak.sh [run]               DURATION (default 40m), SEED (default: drawn and printed),
#                                    SOAK_MIN_OCCURRENCES (default 1000)
#   hack/soak.sh restart-apiserver   stop kube-apiserver and start it again with the same flags
#                                    (the soak's apiserver fault; needs the cluster lock held)
#
# `run` holds the cluster lock, brings the cluster up if it is not (and down again after),
# deploys the operator and the job image from this checkout, builds lockwrap and the job
# program for the host loop, runs the soak and leaves its output in SOAK_OUT (default
# _out/soak/<time>-seed<SEED>): result.txt / result.json (the table), history.json (what
# the checker read) and, when a check failed, history.html (porcupine's view of the runs).
source "$(dirname "$0")/cluster/lib.sh"
cd "$REPO_ROOT"

restart_apiserver() {
  local pid args
  pid=$(pid_of kube-apiserver) || die "kube-apiserver is not running"
  mapfile -d '' args <"/proc/$pid/cmdline"
  stop_pid kube-apiserver "$pid" 30
  start_daemon kube-apiserver "${args[@]}"
  wait_for 120 kube-apiserver kc get --raw /readyz || die "kube-apiserver not ready again; see $LOGS/kube-apiserver.log"
  log "kube-apiserver restarted (pid $(pid_of kube-apiserver))"
}

case ${1:-run} in
  restart-apiserver)
    [ "${LOCKEDCRON_CLUSTER_LOCKED:-}" = 1 ] || die "restart-apiserver: hold the cluster lock (run it from the soak)"
    restart_apiserver
    exit 0 ;;
  run) ;;
  *) die "usage: soak.sh [run|restart-apiserver]" ;;
esac

cluster_lock
was_up=0
if cluster_up; then was_up=1; fi
teardown() {
  local rc=${1:-$?}
  if [ "$was_up" = 0 ]; then hack/cluster/down.sh || rc=1; fi
  exit $rc
}
trap teardown EXIT
hack/cluster/up.sh
# shellcheck disable=SC1091
. "$STATE/env"
hack/cluster/deploy-operator.sh

SEED=${SEED:-$((RANDOM * 32768 + RANDOM))}
DURATION=${DURATION:-40m}
out=${SOAK_OUT:-$REPO_ROOT/_out/soak/$(date -u +%Y%m%dT%H%M%SZ)-seed$SEED}
mkdir -p "$out/bin"
CGO_ENABLED=0 go build -trimpath -o "$out/bin/lockwrap" ./cmd/lockwrap
CGO_ENABLED=0 go build -trimpath -o "$out/bin/e2e-job" ./test/e2e/jobimage
log "soak: DURATION=$DURATION SEED=$SEED, output in $out"
# The manager's log is kept next to the result (of the pod running at the end: a fault
# may have replaced the earlier ones), whatever the soak's outcome.
save_log_and_teardown() {
  local rc=${1:-$?}
  kc logs -n lockedcron-system deploy/lockedcron-controller-manager --timestamps >"$out/manager.log" 2>&1 || true
  teardown "$rc"
}
trap save_log_and_teardown EXIT
SOAK_DURATION=$DURATION SOAK_SEED=$SEED SOAK_OUT=$out SOAK_LOCKWRAP=$out/bin/lockwrap SOAK_JOB=$out/bin/e2e-job \
  SOAK_MIN_OCCURRENCES=${SOAK_MIN_OCCURRENCES:-1000} SOAK_REPO=$REPO_ROOT SOAK_POD_LOGS=$STATE/pod-logs go test -tags soak -count=1 -timeout 4h -v -run '^TestSoak$' ./test/soak/ 2>&1 | tee "$out/soak.log" || {
  # The test's errors scroll by long before it ends (Redis log tails follow them): print
  # them again last, where a CI log's tail shows them.
  if [ -f "$out/result.txt" ]; then cat "$out/result.txt" >&2; fi
  log "soak FAILED (DURATION=$DURATION SEED=$SEED); its errors, from $out/soak.log:"
  grep -E '^\s+[a-z_]+\.go:[0-9]+: ' "$out/soak.log" | grep -v -E '\.go:[0-9]+: (soak:|redistest:)' | cut -c1-300 | tail -n 12 >&2 || true
  exit 1
}
