#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e, build tag e2e) on the local cluster of hack/cluster:
# brings the cluster up if it is not, builds and imports the images, deploys the operator
# with config/local (the generated RBAC, for real), runs the suite, and takes the cluster
# down again if this script brought it up (E2E_KEEP_CLUSTER=1 keeps it).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
# helm (for the chart specs) is built once into the cache, before the cluster is held.
hack/helm.sh >/dev/null
cluster_lock

was_up=0
if cluster_up; then
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
# E2E_ARGS is split into words on purpose: several go test flags.
# shellcheck disable=SC2086
go test -tags e2e -count=1 -timeout 40m -v ./test/e2e/ ${E2E_ARGS:-}
