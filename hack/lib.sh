# shellcheck shell=bash disable=SC2034
# Shared by the hack/*.sh scripts and hack/cluster/lib.sh. Sourced, not run:
#   source "$(dirname "$0")/lib.sh"
# It turns on strict mode and sets the names below; it prints nothing and does not cd
# (a script that works in the checkout says `cd "$REPO_ROOT"`).
set -euo pipefail

# REPO_ROOT is the checkout.
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# STATE is the local cluster's state folder (hack/cluster): its admin.kubeconfig, env file,
# logs, PKI and data.
STATE=${LOCKEDCRON_CLUSTER_DIR:-/var/tmp/lockedcron-cluster}
# KUBECTL is the kubectl to run.
KUBECTL=${KUBECTL:-kubectl}
# PROG is the script's name, for msg and fail ("fuzz" for hack/fuzz.sh).
PROG=$(basename "$0" .sh)
# LOG_TAG is what log puts in brackets ("[demo] …"); empty: the time ("[15:04:05] …").
LOG_TAG=

# log prints a progress line on stderr; die logs an error and exits 1.
log() { printf '[%s] %s\n' "${LOG_TAG:-$(date +%H:%M:%S)}" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# msg prints "PROG: words" on stderr; fail does, then exits 1.
msg() { printf '%s: %s\n' "$PROG" "$*" >&2; }
fail() {
  msg "$@"
  exit 1
}

# cluster_up succeeds if the local cluster's API server answers.
cluster_up() {
  [ -f "$STATE/admin.kubeconfig" ] && $KUBECTL --kubeconfig "$STATE/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1
}

# cluster_lock waits until no other script uses the local cluster, then holds it until the
# calling script exits (one cluster per machine: two e2e runs, a soak and a demo from different
# checkouts would otherwise redeploy the operator under each other). Re-entrant through
# LOCKEDCRON_CLUSTER_LOCKED, so a script holding it can run another that asks for it.
# The lock is held by a small background process that lives as long as the script, not on
# a file descriptor of the script: a daemon the script starts (Redis, the kubelet) would
# inherit that descriptor and keep the cluster locked after the script ended.
cluster_lock() {
  [ "${LOCKEDCRON_CLUSTER_LOCKED:-}" = 1 ] && return 0
  mkdir -p "$(dirname "$STATE")"
  local held owner=$$
  held=$(mktemp -u "${TMPDIR:-/tmp}/lockedcron-cluster-held.XXXXXX")
  flock "$STATE.lock" bash -c 'touch "$1"; while kill -0 "$2" 2>/dev/null; do sleep 0.5; done' _ "$held" "$owner" \
    </dev/null >/dev/null 2>&1 &
  local waited=0
  while [ ! -e "$held" ]; do
    waited=$((waited + 1))
    if [ "$waited" = 10 ]; then
      log "waiting for another user of the local cluster ($STATE.lock)"
    fi
    sleep 0.2
  done
  rm -f "$held"
  export LOCKEDCRON_CLUSTER_LOCKED=1
}
