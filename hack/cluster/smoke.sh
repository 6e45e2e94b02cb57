#!/usr/bin/env bash
# Proves the local cluster runs what the product needs: one pod whose init container copies the
# e2e job binary into an emptyDir and whose main container runs it from there (as lockwrap's
# `cp` does), as user 65532, talking to the host Redis at the bridge gateway. Waits for
# Succeeded, prints the termination message and the audit records, and the create→Succeeded time.
#   hack/cluster/smoke.sh            (after up.sh; builds and imports the job image if missing)
source "$(dirname "$0")/lib.sh"
[ -f "$KUBECONFIG_ADMIN" ] || die "no cluster: run hack/cluster/up.sh"
IMAGE=k8s.local/lockedcron-e2e-job:dev
if ! ctr_ -n k8s.io images ls -q | grep -qx "$IMAGE"; then "$CLUSTER_HACK/images.sh" job >/dev/null; fi
ns=default pod=lockedcron-smoke
kc -n $ns delete pod $pod --ignore-not-found --wait=true >/dev/null
occ=$(date -u +%Y-%m-%dT%H:%M:%SZ)
manifest=$(cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $pod, namespace: $ns}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  securityContext: {runAsNonRoot: true}
  volumes: [{name: shared, emptyDir: {}}]
  initContainers:
  - name: copy
    image: $IMAGE
    imagePullPolicy: Never
    command: [/usr/local/bin/e2e-job, cp, /shared/e2e-job]
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: job
    image: $IMAGE
    imagePullPolicy: Never
    command: [/shared/e2e-job, --sleep, 1s, --label, smoke]
    volumeMounts: [{name: shared, mountPath: /shared}]
    env:
    - {name: LOCKEDCRON_OCCURRENCE, value: "$occ"}
    - {name: LOCKEDCRON_HOLDER, value: "local/$ns/$pod"}
    - {name: LOCKEDCRON_FENCING_TOKEN, value: "1"}
    - {name: E2E_REDIS_URL, value: "redis://$POD_GATEWAY:$REDIS_PORT/0"}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
YAML
)
start=$(date +%s.%N)
echo "$manifest" | kc apply -f - >/dev/null
if ! kc -n $ns wait pod/$pod --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s >/dev/null; then
  kc -n $ns describe pod $pod >&2
  kc -n $ns logs $pod --all-containers >&2 || true
  die "pod did not succeed"
fi
end=$(date +%s.%N)
echo "pod create→Succeeded: $(echo "$end - $start" | bc 2>/dev/null || awk "BEGIN{print $end-$start}")s"
echo "pod IP: $(kc -n $ns get pod $pod -o jsonpath='{.status.podIP}')"
echo "termination message: $(kc -n $ns get pod $pod -o jsonpath='{.status.containerStatuses[0].state.terminated.message}')"
echo "logs:"; kc -n $ns logs $pod -c job
echo "audit (last 2 of lockedcron-e2e:audit):"; redis-cli -h 127.0.0.1 -p "$REDIS_PORT" lrange lockedcron-e2e:audit -2 -1
kc -n $ns delete pod $pod --wait=false >/dev/null
