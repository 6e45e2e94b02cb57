#!/usr/bin/env bash
# make demo / make demo-down.
#
# With no reachable cluster in KUBECONFIG: brings up the local cluster (hack/cluster), builds
# and imports the images, deploys the operator (config/local), applies config/samples (one
# job in two namespaces sharing one lock key, every 10 s), waits about a minute and prints
# `kubectl get lcj -A -o wide` and the audit list: what actually ran.
#
# With a reachable cluster in KUBECONFIG: deploys there instead. That cluster must be able to
# pull the images and its pods must reach a Redis, so say which:
#   IMG=registry/lockedcron:tag JOB_IMG=registry/lockedcron-e2e-job:tag \
#   REDIS_URL=redis://redis.infra.svc:6379/0 make demo
# (build IMG from the Dockerfile; JOB_IMG from test/e2e/jobimage with the same recipe).
#
# It applies config/default there: the operator in lockedcron-system, an installed one's
# image replaced with IMG.
#
# `hack/demo.sh down` removes the samples and, for the local cluster, tears it down; on a
# reachable cluster the operator stays (deleting it deletes the CRD, and every
# LockedCronJob in the cluster with it).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
LOG_TAG=demo
cluster_lock
WAIT=${DEMO_SECONDS:-60}

remote=0
if [ -n "${KUBECONFIG:-}" ] && [ "$KUBECONFIG" != "$STATE/admin.kubeconfig" ] &&
  $KUBECTL get --raw /readyz >/dev/null 2>&1; then
  remote=1
fi

if [ "${1:-up}" = down ]; then
  if [ $remote = 1 ]; then
    # The samples only: deleting config/default deletes the CRD, and with it every
    # LockedCronJob in the cluster, not only the demo's.
    $KUBECTL delete --ignore-not-found -k config/samples
    log "the operator stays; 'kubectl delete -k config/default' removes it, with the CRD and every LockedCronJob in the cluster"
  else
    if [ -f "$STATE/admin.kubeconfig" ]; then
      KUBECONFIG=$STATE/admin.kubeconfig $KUBECTL delete --ignore-not-found --wait=false -k config/samples 2>/dev/null || true
    fi
    hack/cluster/down.sh
  fi
  exit 0
fi

samples=config/samples
if [ $remote = 1 ]; then
  : "${IMG:?a cluster in KUBECONFIG is reachable: set IMG to an operator image it can pull (see hack/demo.sh)}"
  : "${JOB_IMG:?set JOB_IMG to the e2e job image the cluster can pull (see hack/demo.sh)}"
  : "${REDIS_URL:?set REDIS_URL to a Redis that pods in that cluster can reach (see hack/demo.sh)}"
  log "deploying to the cluster in KUBECONFIG ($($KUBECTL config current-context))"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  cp -r config "$tmp/"
  sed -i "s|k8s.local/lockedcron:dev|$IMG|g" "$tmp/config/manager/manager.yaml"
  sed -i "s|k8s.local/lockedcron-e2e-job:dev|$JOB_IMG|g; s|imagePullPolicy: Never|imagePullPolicy: IfNotPresent|; s|redis://10.244.0.1:6379/0|$REDIS_URL|" "$tmp"/config/samples/team-*.yaml
  $KUBECTL apply --server-side -k "$tmp/config/default"
  $KUBECTL -n lockedcron-system rollout status deployment/lockedcron-controller-manager --timeout 180s
  samples=$tmp/config/samples
else
  log "no reachable cluster in KUBECONFIG: using the local cluster (hack/cluster)"
  hack/cluster/up.sh
  export KUBECONFIG=$STATE/admin.kubeconfig
  hack/cluster/deploy-operator.sh
fi

$KUBECTL apply -k "$samples"
log "samples applied; watching for ${WAIT}s"
end=$((SECONDS + WAIT))
while [ $SECONDS -lt $end ]; do
  sleep 10
  log "$((end - SECONDS))s left"
done
echo
echo "\$ kubectl get lcj -A -o wide"
$KUBECTL get lcj -A -o wide
if [ $remote = 0 ]; then
  echo
  echo "What actually ran (the job's own audit list in Redis; one run per occurrence):"
  redis-cli -p "${LOCKEDCRON_REDIS_PORT:-6379}" --raw lrange lockedcron-e2e:audit 0 -1 |
    grep '"event":"end"' | grep '/team-' | tail -12
fi
echo
if [ $remote = 1 ]; then
  echo "make demo-down removes the samples (the operator stays)."
else
  echo "make demo-down removes it all."
fi
