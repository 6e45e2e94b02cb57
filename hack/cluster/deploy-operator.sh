#!/usr/bin/env bash
# Builds the operator and e2e job images, imports them into the local cluster, and deploys
# the operator with config/local; waits until the new manager is available.
set -euo pipefail
cd "$(dirname "$0")/../.."
STATE=${LOCKEDCRON_CLUSTER_DIR:-/var/tmp/lockedcron-cluster}
export KUBECONFIG=${KUBECONFIG:-$STATE/admin.kubeconfig}
KUBECTL=${KUBECTL:-kubectl}
hack/cluster/images.sh job operator
$KUBECTL apply --server-side --force-conflicts -k config/local
# (kubectl wait errors out while a new CRD has no conditions yet, so poll.)
for _ in $(seq 300); do
  est=$($KUBECTL get crd lockedcronjobs.scheduling.lockedcron.io -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null || true)
  [ "$est" = True ] && break
  sleep 0.2
done
[ "$est" = True ] || { echo "deploy-operator: the LockedCronJob CRD was not Established within 60s" >&2; exit 1; }
# The image tag does not change between builds: restart so that the manager runs this build.
$KUBECTL -n lockedcron-system rollout restart deployment/lockedcron-controller-manager
$KUBECTL -n lockedcron-system rollout status deployment/lockedcron-controller-manager --timeout 180s
