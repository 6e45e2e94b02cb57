#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e, build tag e2e) on the local cluster of hack/cluster:
# brings the cluster up if it is not, builds and imports the images, deploys the operator
# with config/local (the generated RBAC, for real), runs the suite, and takes the cluster
# down again if this script brought it up (E2E_KEEP_CLUSTER=1 keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${LOCKEDCRON_CLUSTER_DIR:-/var/tmp/lockedcron-cluster}
KUBECTL=${KUBECTL:-kubectl}

was_up=0
if [ -f "$STATE/admin.kubeconfig" ] && $KUBECTL --kubeconfig "$STATE/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1; then
  was_up=1
fi
teardown() {
  local rc=$?
  if [ "$was_up" = 0 ] && [ "${E2E_KEEP_CLUSTER:-0}" != 1 ]; then
    hack/cluster/down.sh || rc=1
  fi
  exit $rc
}
trap teardown EXIT

hack/cluster/up.sh
# shellcheck disable=SC1091
. "$STATE/env"
hack/cluster/deploy-operator.sh
go test -tags e2e -count=1 -timeout 40m -v ./test/e2e/ ${E2E_ARGS:-}
