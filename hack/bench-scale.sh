#!/usr/bin/env bash
# Creation lag at scale, lockedcron's manager against the native CronJob controller
# (issue 13, "Benchmarks"). Builds the manager and the harness (test/bench/scale), and for
# each N starts, on free loopback ports in a temporary folder: etcd + kube-apiserver
# (envtest's control plane, its own certs), kube-controller-manager --controllers=cronjob-controller,
# the manager (a process with a kubeconfig, leader election off) and a redis-server; both
# controllers at the same client QPS/burst. No kubelet, no scheduler. Prints per controller
# and N: creation lag p50/p90/p99/max, created/expected, API calls per occurrence, RSS and
# CPU seconds, and the ratios lockedcron/native.
#
#   hack/bench-scale.sh                      N=20,1000 (20 is the idle case)
#   N=1000,5000,10000 hack/bench-scale.sh
#   WINDOW=3 WARMUP=1 QPS=100 BURST=200 PREPARE_AHEAD=10 N=5000 hack/bench-scale.sh
#   WARMUP=2 WINDOW=1 N=1000 BENCH_ARGS="-native=false -takeover-before 20s" hack/bench-scale.sh   (a takeover)
# Needs go and redis-server; builds kube-controller-manager into the cache once if missing.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
command -v redis-server >/dev/null || fail "redis-server not found (hack/install-deps.sh installs it)"
assets=$(hack/k8s-binaries.sh kube-controller-manager)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "building the manager and the harness"
CGO_ENABLED=0 go build -trimpath -o "$work/manager" ./cmd/manager
go build -o "$work/scale" ./test/bench/scale
echo "== manager built from $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)'); $(go env GOVERSION); kube $(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' hack/tools/k8s/go.mod)"
# BENCH_ARGS is split into words on purpose: several harness flags.
# shellcheck disable=SC2086
"$work/scale" -assets "$assets" -manager "$work/manager" -crds config/crd/bases \
  -n "${N:-20,1000}" -window "${WINDOW:-3}" -warmup "${WARMUP:-1}" \
  -qps "${QPS:-100}" -burst "${BURST:-200}" -prepare-ahead "${PREPARE_AHEAD:-0}" \
  ${BENCH_ARGS:-}
