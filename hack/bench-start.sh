#!/usr/bin/env bash
# Start lag on the local cluster (issue 13, "Benchmarks"): how long after its scheduled
# instant a job's own process starts, lockedcron against the native CronJob controller.
#
# Deploys the operator from this checkout (hack/cluster/deploy-operator.sh, as hack/e2e.sh
# does), builds a tiny static job image (test/bench/startclock: it prints the node's clock
# as its first instruction) and, for each variant in turn, creates M objects in a namespace
# of their own, all scheduled for one instant (a whole minute, "MM HH * * *" in Etc/UTC, so
# each fires once), waits for their pods to finish and reads the printed clocks from the pod
# logs: start lag = printed time − scheduled time. Prints p50/p90/p99/max per variant and
# the ratios to native. Holds the cluster lock throughout; deletes its namespaces and image.
#
#   hack/bench-start.sh                               M=30, variants: native lockedcron prepare10
#   M=20 VARIANTS="native prepare10" hack/bench-start.sh
# Variants: native (CronJob → Job → Pod), lockedcron (LockedCronJob), prepareN
# (LockedCronJob with spec.prepareAheadSeconds: N), and two floors that no controller
# makes: pod (bare Pods with the job's one container, POSTed by this script at the instant)
# and podinit (the same with lockedcron's init container in front, copying lockwrap into an
# emptyDir, with the controller's security context and resources). pod is the least any
# pod-per-occurrence design starts in on this node; podinit − pod is what the init
# container costs; lockedcron − podinit is the controller and lockwrap's lock.
source "$(dirname "$0")/lib.sh"
# shellcheck source=cluster/lib.sh
source "$REPO_ROOT/hack/cluster/lib.sh"
cd "$REPO_ROOT"
cluster_lock
cluster_up || fail "the local cluster is not up (make cluster-up); this benchmark does not bring it up"
# shellcheck disable=SC1091
. "$STATE/env"
M=${M:-30}
VARIANTS=${VARIANTS:-native lockedcron prepare10}
IMAGE=k8s.local/lockedcron-bench-clock:dev
TIMEOUT=${TIMEOUT:-300} # seconds after the instant to wait for every pod to finish
k() { $KUBECTL "$@"; }

work=$(mktemp -d)
made_ns=()
cleanup() {
  local rc=$?
  [ -z "${proxy_pid:-}" ] || kill "$proxy_pid" 2>/dev/null || true # the floor variants' kubectl proxy
  for ns in "${made_ns[@]}"; do k delete namespace "$ns" --ignore-not-found --wait=true --timeout=180s >/dev/null 2>&1 || log "namespace $ns still terminating"; done
  ctr_ -n k8s.io images rm "$IMAGE" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

log "deploying the operator from this checkout"
hack/cluster/deploy-operator.sh >"$work/deploy.log" 2>&1 || { cat "$work/deploy.log" >&2; fail "deploy-operator.sh failed"; }
log "building $IMAGE"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/startclock" ./test/bench/startclock
go build -o "$work/imagebuild" ./hack/imagebuild
"$work/imagebuild" --name "$IMAGE" --out "$work/startclock.tar" --file "$work/startclock=/startclock" --entrypoint /startclock >/dev/null
ctr_ -n k8s.io images import "$work/startclock.tar" >/dev/null

echo "== machine: $(nproc) cpus ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== local cluster (one node: real kubelet + containerd); operator $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with uncommitted changes)'); M=$M jobs per variant, one occurrence each, variants run one after another"

objects() { # VARIANT NS MIN HOUR
  local v=$1 ns=$2 min=$3 hour=$4 i ahead=""
  case $v in prepare*) ahead="  prepareAheadSeconds: ${v#prepare}" ;; esac
  for i in $(seq -w 1 "$M"); do
    if [ "$v" = native ]; then
      cat <<YAML
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: start-$i, namespace: $ns}
spec:
  schedule: "$min $hour * * *"
  timeZone: Etc/UTC
  jobTemplate:
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          containers:
          - {name: job, image: $IMAGE, imagePullPolicy: Never, command: [/startclock]}
YAML
    else
      cat <<YAML
---
apiVersion: scheduling.lockedcron.io/v1alpha1
kind: LockedCronJob
metadata: {name: start-$i, namespace: $ns}
spec:
  schedule: "$min $hour * * *"
  timeZone: Etc/UTC
$ahead
  lock:
    redis:
      secretRef: {name: redis}
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: job, image: $IMAGE, imagePullPolicy: Never, command: [/startclock]}
YAML
    fi
  done
}

# stats FILE prints "n p50 p90 p99 max" (nearest rank, ms) of the numbers in FILE.
stats() {
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "0 - - - -"; exit }
    split("0.5 0.9 0.99", p, " "); printf "%d", NR
    for (i = 1; i <= 3; i++) { r = int(p[i] * NR); if (r < p[i] * NR) r++; if (r < 1) r = 1; printf " %d", v[r] }
    printf " %d\n", v[NR] }'
}

# podjson VARIANT I prints the bare Pod of a floor variant (pod, podinit).
podjson() {
  local init="" vols=""
  if [ "$1" = podinit ]; then
    init=',"initContainers":[{"name":"lockedcron-install","image":"k8s.local/lockedcron:dev","imagePullPolicy":"Never","command":["/lockwrap","cp","/lockedcron/lockwrap"],"volumeMounts":[{"name":"lockedcron-bin","mountPath":"/lockedcron"}],"securityContext":{"runAsUser":65532,"runAsGroup":65532,"runAsNonRoot":true,"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}},"resources":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"cpu":"100m","memory":"64Mi"}}}]'
    vols=',"volumes":[{"name":"lockedcron-bin","emptyDir":{}}]'
  fi
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"start-%s","labels":{"bench-start":"%s"}},"spec":{"restartPolicy":"Never","containers":[{"name":"job","image":"%s","imagePullPolicy":"Never","command":["/startclock"]}]%s%s}}' "$2" "$1" "$IMAGE" "$init" "$vols"
}
proxy_port="" proxy_pid=""
# post_at AT NS VARIANT POSTs the variant's M pods through a kubectl proxy at the instant AT.
post_at() {
  local at=$1 ns=$2 v=$3 i wait_ns posts=()
  if [ -z "$proxy_port" ]; then
    k proxy --port=0 >"$work/proxy.out" 2>&1 &
    proxy_pid=$!
    for _ in $(seq 100); do
      proxy_port=$(sed -n 's/^Starting to serve on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/proxy.out")
      [ -n "$proxy_port" ] && break
      sleep 0.1
    done
    [ -n "$proxy_port" ] || fail "kubectl proxy did not start: $(cat "$work/proxy.out")"
  fi
  for i in $(seq -w 1 "$M"); do podjson "$v" "$i" >"$work/$v-$i.json"; done
  wait_ns=$((at * 1000000000 - $(date +%s%N)))
  [ "$wait_ns" -gt 0 ] && sleep "$(awk -v n="$wait_ns" 'BEGIN { printf "%.3f", n / 1e9 }')"
  for i in $(seq -w 1 "$M"); do
    curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data "@$work/$v-$i.json" "http://127.0.0.1:$proxy_port/api/v1/namespaces/$ns/pods" &
    posts+=($!)
  done
  wait "${posts[@]}" # not the proxy
}

declare -A result created
for v in $VARIANTS; do
  case $v in native | lockedcron | prepare[0-9]* | pod | podinit) ;; *) fail "unknown variant $v (native, lockedcron, prepareN, pod, podinit)" ;; esac
  ns=bench-start-$v
  k delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
  k create namespace "$ns" >/dev/null
  made_ns+=("$ns")
  k -n "$ns" create secret generic redis --from-literal=url="$LOCKEDCRON_E2E_REDIS_POD_URL" >/dev/null
  until k -n "$ns" get serviceaccount default >/dev/null 2>&1; do sleep 0.5; done
  ahead=0
  case $v in prepare*) ahead=${v#prepare} ;; esac
  # The instant: the first whole minute at least 20 s (plus the prepare-ahead) away.
  now=$(date +%s)
  at=$(((now + 20 + ahead + 59) / 60 * 60))
  case $v in
    pod | podinit)
      log "$v: $M bare pods to be POSTed in $ns at $(date -u -d "@$at" +%H:%M:%S)"
      post_at "$at" "$ns" "$v"
      sel=bench-start="$v"
      ;;
    *)
      objects "$v" "$ns" "$(date -u -d "@$at" +%-M)" "$(date -u -d "@$at" +%-H)" >"$work/$v.yaml"
      k apply -f "$work/$v.yaml" >/dev/null
      log "$v: $M objects in $ns, scheduled for $(date -u -d "@$at" +%H:%M:%S)"
      if [ "$v" = native ]; then sel=batch.kubernetes.io/job-name; else sel=scheduling.lockedcron.io/job; fi
      ;;
  esac
  # Wait for every pod of the instant to finish (or the timeout).
  while :; do
    done_pods=$(k -n "$ns" get pods -l "$sel" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -cE '^(Succeeded|Failed)$' || true)
    [ "$done_pods" -ge "$M" ] && break
    if [ "$(date +%s)" -ge $((at + TIMEOUT)) ]; then
      log "$v: only $done_pods of $M pods finished within ${TIMEOUT}s of the instant"
      break
    fi
    sleep 2
  done
  # One pod at a time: a selector-wide `kubectl logs` stops at the first pod still initialising.
  : >"$work/$v.logs"
  k -n "$ns" get pods -l "$sel" -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.metadata.creationTimestamp}{"\n"}{end}' >"$work/$v.pods"
  : >"$work/$v.created"
  while read -r pod phase created; do
    echo $((($(date -u -d "$created" +%s) - at) * 1000)) >>"$work/$v.created"
    case $phase in Running | Succeeded | Failed) k -n "$ns" logs "$pod" -c job >>"$work/$v.logs" 2>/dev/null || true ;; esac
  done <"$work/$v.pods"
  : >"$work/$v.lags"
  while read -r ts; do
    t=$(date -u -d "$ts" +%s%N)
    echo $(((t - at * 1000000000) / 1000000)) >>"$work/$v.lags"
  done < <(sed -n 's/.*startclock \([0-9T:.Z-]*\).*/\1/p' "$work/$v.logs")
  result[$v]=$(stats "$work/$v.lags")
  created[$v]=$(stats "$work/$v.created")
  # Not needed any more: free the node for the next variant.
  k delete namespace "$ns" --wait=true --timeout=180s >/dev/null 2>&1 || log "namespace $ns still terminating"
done

echo "== start lag: the job's first instruction (its printed clock) − the scheduled instant, ms"
echo "   (pod created: its creationTimestamp − the instant, whole seconds; negative = before the instant)"
printf '  %-12s %9s %9s %9s %9s %9s   %s\n' variant started p50 p90 p99 max "pod created p50/max"
for v in $VARIANTS; do
  read -r n p50 p90 p99 mx <<<"${result[$v]}"
  read -r _ c50 _ _ cmx <<<"${created[$v]}"
  printf '  %-12s %9s %9s %9s %9s %9s   %s\n' "$v" "$n/$M" "$p50" "$p90" "$p99" "$mx" "$c50/$cmx"
done
if [ -n "${result[native]:-}" ]; then
  read -r _ n50 _ n99 _ <<<"${result[native]}"
  for v in $VARIANTS; do
    [ "$v" = native ] && continue
    read -r _ p50 _ p99 _ <<<"${result[$v]}"
    awk -v v="$v" -v a="$p50" -v b="$n50" -v c="$p99" -v d="$n99" 'BEGIN {
      printf "  ratio %s/native: p50 %s, p99 %s\n", v, (b > 0 && a != "-" ? sprintf("%.2f×", a / b) : "-"), (d > 0 && c != "-" ? sprintf("%.2f×", c / d) : "-") }'
  done
fi
