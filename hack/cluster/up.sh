#!/usr/bin/env bash
# Brings up a throw-away single-node Kubernetes cluster on this Linux host (root):
# containerd + runc, etcd, kube-apiserver, controller-manager, scheduler, kubelet, a CNI bridge
# (cni0, 10.244.0.0/24) and a host Redis on 127.0.0.1 and 10.244.0.1 — all under one state
# folder ($LOCKEDCRON_CLUSTER_DIR, default /var/tmp/lockedcron-cluster), everything on loopback.
#
#   hack/cluster/up.sh          # prints: export KUBECONFIG=$STATE/admin.kubeconfig
#   hack/cluster/down.sh        # stops and removes it all
#
# Idempotent: a healthy cluster is left as is; leftovers of a crash or a partial teardown are
# torn down first. Env: LOCKEDCRON_CLUSTER_DIR, LOCKEDCRON_API_PORT (6443), LOCKEDCRON_REDIS_PORT
# (6379), LOCKEDCRON_ETCD_PORT (12379), LOCKEDCRON_NODE_NAME, LOCKEDCRON_POD_MASQ (false: pods reach
# only the host and each other; true: masquerade pod traffic leaving the bridge).
source "$(dirname "$0")/lib.sh"
need_root
t0=$SECONDS

healthy() {
  local d
  for d in "${DAEMONS[@]}"; do pid_of "$d" >/dev/null || return 1; done
  kc get --raw /readyz >/dev/null 2>&1 || return 1
  [ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

if [ -f "$RUN/up.complete" ] && healthy; then
  log "cluster already up and healthy ($STATE)"
  echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
  exit 0
fi

# --- packages -------------------------------------------------------------------------------
"$CLUSTER_HACK/install-deps.sh"
command -v "$KUBECTL" >/dev/null || die "kubectl is needed (a recent one: 1.3x; set KUBECTL=/path/to/kubectl)"

# --- binaries (version-keyed cache, built once) --------------------------------------------
BIN=$(k8s_bin_dir | tail -1)
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  [ -x "$BIN/$b" ] || die "missing $BIN/$b"
done

# --- leftovers of an earlier run ------------------------------------------------------------
if [ -d "$RUN" ] || [ -d "$STATE/containerd/state" ] || ip link show "$BRIDGE" >/dev/null 2>&1 \
   || grep -q " $STATE/" /proc/self/mountinfo; then
  log "leftovers of an earlier cluster found: tearing them down first"
  "$CLUSTER_HACK/down.sh" --keep-going
fi
mkdir -p "$STATE" "$RUN" "$LOGS"
for f in "$LOGS"/*.log; do [ -f "$f" ] && mv -f "$f" "$f.prev"; done

# Remember what existed before, so that down.sh removes only what we created.
if [ ! -f "$STATE/preexisting" ]; then
  : >"$STATE/preexisting.tmp"
  for p in "${FOREIGN_PATHS[@]}"; do [ -e "$p" ] && echo "$p" >>"$STATE/preexisting.tmp"; done
  echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)" >>"$STATE/preexisting.tmp"
  mv "$STATE/preexisting.tmp" "$STATE/preexisting"
fi

# --- PKI and kubeconfigs --------------------------------------------------------------------
"$CLUSTER_HACK/pki.sh"

# --- configs --------------------------------------------------------------------------------
render() { # TEMPLATE OUT
  sed -e "s|@STATE@|$STATE|g" -e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" -e "s|@CNI_BIN_DIR@|$CNI_BIN_DIR|g" \
      -e "s|@BRIDGE@|$BRIDGE|g" -e "s|@POD_SUBNET@|$POD_SUBNET|g" -e "s|@POD_GATEWAY@|$POD_GATEWAY|g" \
      -e "s|@POD_MASQ@|${LOCKEDCRON_POD_MASQ:-false}|g" "$CLUSTER_HACK/templates/$1" >"$2"
}
mkdir -p "$STATE/containerd" "$STATE/cni/net.d" "$STATE/cni/networks" "$STATE/pod-logs" \
         "$STATE/volume-plugins" "$STATE/kubelet" "$STATE/etcd" "$STATE/images"
render containerd.toml "$STATE/containerd/config.toml"
render 10-lockedcron.conflist "$STATE/cni/net.d/10-lockedcron.conflist"
render kubelet-config.yaml "$STATE/kubelet-config.yaml"

# --- pod bridge first, so Redis can bind the gateway address ---------------------------------
# A fixed (locally administered) MAC: a bridge without one takes the lowest MAC of its ports
# and changes it whenever a pod's veth comes or goes, and every pod's ARP entry for the
# gateway then points nowhere for up to ~30 s (seen as Redis at the gateway timing out).
ip link add "$BRIDGE" address 02:6c:63:00:00:01 type bridge
ip addr add "$POD_GATEWAY/${POD_SUBNET#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up
modprobe br_netfilter 2>/dev/null || true
modprobe overlay 2>/dev/null || true

log "starting redis on 127.0.0.1:$REDIS_PORT and $POD_GATEWAY:$REDIS_PORT"
redis_start

# --- containerd + the pause image -----------------------------------------------------------
log "starting containerd"
start_daemon containerd containerd --config "$STATE/containerd/config.toml"
wait_for 30 containerd ctr_ version || die "containerd did not come up; see $LOGS/containerd.log"
pause_tar=$STATE/images/pause.tar
if [ ! -s "$pause_tar" ] || [ -n "$(find "$REPO_ROOT/hack/pause" "$REPO_ROOT/hack/imagebuild" -newer "$pause_tar" -name '*.go' 2>/dev/null)" ]; then
  "$CLUSTER_HACK/images.sh" --no-import pause >/dev/null
fi
for t in "$STATE"/images/*.tar; do
  [ -f "$t" ] && ctr_ -n k8s.io images import "$t" >/dev/null
done

# --- control plane --------------------------------------------------------------------------
log "starting etcd"
start_daemon etcd "$BIN/etcd" --name lockedcron --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "lockedcron=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn
wait_for 30 etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not come up; see $LOGS/etcd.log"

log "starting kube-apiserver on https://127.0.0.1:$API_PORT"
start_daemon kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
  --endpoint-reconciler-type none \
  --authorization-mode Node,RBAC --allow-privileged=true \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types Hostname \
  --enable-admission-plugins NodeRestriction --profiling=false
wait_for 90 kube-apiserver kc get --raw /readyz || die "kube-apiserver not ready; see $LOGS/kube-apiserver.log"

log "starting kube-controller-manager and kube-scheduler"
start_daemon kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig "$STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --allocate-node-cidrs=false --flex-volume-plugin-dir "$STATE/volume-plugins" --profiling=false
start_daemon kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig "$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false --profiling=false

log "starting kubelet (node $NODE_NAME)"
start_daemon kubelet "$BIN/kubelet" --config "$STATE/kubelet-config.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
  --root-dir "$STATE/kubelet" --hostname-override "$NODE_NAME" --v 1

node_ready() { [ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_for 120 node node_ready || die "node $NODE_NAME not Ready; see $LOGS/kubelet.log"
# pods need the namespace's default ServiceAccount (made by the controller-manager)
wait_for 60 serviceaccount kc -n default get serviceaccount default || die "no default ServiceAccount; see $LOGS/kube-controller-manager.log"

write_env_file
touch "$RUN/up.complete"
log "cluster up in $((SECONDS - t0))s (state $STATE; env file $STATE/env)"
echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
