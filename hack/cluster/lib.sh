# shellcheck shell=bash disable=SC2034
# Shared settings and helpers of hack/cluster/*.sh. Sourced, not run.
# Everything the cluster writes lives under $STATE, except the paths of FOREIGN_PATHS
# (which the components insist on) — those are removed at teardown when absent before up.
CLUSTER_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Strict mode, REPO_ROOT, STATE, KUBECTL, log and die.
source "$CLUSTER_HACK/../lib.sh"
# The node name must resolve to 127.0.0.1 (the API server reaches the kubelet by it, and the
# kubelet refuses a loopback --node-ip), hence "localhost".
NODE_NAME=${LOCKEDCRON_NODE_NAME:-localhost}
API_PORT=${LOCKEDCRON_API_PORT:-6443}
ETCD_PORT=${LOCKEDCRON_ETCD_PORT:-12379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
REDIS_PORT=${LOCKEDCRON_REDIS_PORT:-6379}
POD_SUBNET=10.244.0.0/24
POD_GATEWAY=10.244.0.1
SERVICE_CIDR=10.96.0.0/16
SERVICE_API_IP=10.96.0.1
BRIDGE=cni0
CNI_BIN_DIR=${LOCKEDCRON_CNI_BIN_DIR:-/usr/lib/cni}
PAUSE_IMAGE=k8s.local/pause:dev
KUBECONFIG_ADMIN=$STATE/admin.kubeconfig
PKI=$STATE/pki
RUN=$STATE/run         # pid files
LOGS=$STATE/logs
CTR_SOCK=$STATE/containerd/containerd.sock
# Daemons in start order; stopped in reverse.
DAEMONS=(redis containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
# Paths written outside $STATE (containerd shim sockets, CNI result cache, kubelet device
# plugins, container log links, util-linux utab). Parents first.
FOREIGN_PATHS=(/run/containerd /run/containerd/s /var/lib/cni /var/lib/cni/results /var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/containers /run/mount)

need_root() { [ "$(id -u)" = 0 ] || die "run as root (the cluster needs mounts, cgroups, iptables and a bridge)"; }

# k8s_bin_dir prints the version-keyed cache folder of the Kubernetes binaries (building what is missing).
k8s_bin_dir() { "$REPO_ROOT/hack/k8s-binaries.sh" kube-controller-manager kube-scheduler kubelet; }

ctr_() { ctr --address "$CTR_SOCK" "$@"; }
kc() { "${KUBECTL:-kubectl}" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

pid_of() { # name -> pid if its pidfile names a live process running the expected program
  local f="$RUN/$1.pid" pid exe
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ -s "$RUN/$1.exe" ] && [ "$exe" != "$(cat "$RUN/$1.exe")" ] && return 1
  echo "$pid"
}

# start_daemon NAME CMD... : runs CMD in its own session with exec, so the recorded PID is the daemon's.
start_daemon() {
  local name=$1; shift
  local bin; bin=$(readlink -f "$(command -v "$1")")
  mkdir -p "$RUN" "$LOGS"
  (
    echo "$BASHPID" >"$RUN/$name.pid"
    # 9>&-: a daemon must not inherit a lock descriptor of the script that started it
    # (cluster_lock held the lock on fd 9 at first; a restarted Redis kept it for good).
    exec setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&-
  ) &
  echo "$bin" >"$RUN/$name.exe"
  local i
  for i in $(seq 50); do # wait until the exec happened (then /proc/PID/exe is the daemon)
    [ "$(readlink "/proc/$!/exe" 2>/dev/null)" = "$bin" ] && break
    sleep 0.02
  done
  pid_of "$name" >/dev/null || die "$name did not start; see $LOGS/$name.log: $(tail -5 "$LOGS/$name.log")"
}

# stop_pid NAME PID GRACE: TERM, wait up to GRACE seconds, then KILL; waits until gone.
stop_pid() {
  local name=$1 pid=$2 grace=${3:-10} i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq $((grace * 10))); do
    [ -d "/proc/$pid" ] || { log "stopped $name ($pid)"; return 0; }
    # a zombie whose parent is gone counts as stopped
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && { log "stopped $name ($pid)"; return 0; }
    sleep 0.1
  done
  log "$name ($pid) ignored TERM for ${grace}s: KILL"
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 50); do [ -d "/proc/$pid" ] || return 0; sleep 0.1; done
  log "WARNING: $name ($pid) still present after KILL"
}

stop_daemon() { # NAME [GRACE]
  local pid
  if pid=$(pid_of "$1"); then stop_pid "$1" "$pid" "${2:-10}"; fi
  rm -f "$RUN/$1.pid" "$RUN/$1.exe"
}

wait_for() { # SECONDS DESCRIPTION CMD...
  local t=$1 what=$2; shift 2
  local deadline=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# Data persists across redis.sh restart (append-only file under $STATE/redis), not across down.sh.
redis_start() {
  mkdir -p "$STATE/redis"
  start_daemon redis redis-server --bind "127.0.0.1 $POD_GATEWAY" --port "$REDIS_PORT" \
    --protected-mode no --save "" --appendonly yes --appendfsync everysec --daemonize no \
    --dir "$STATE/redis" --logfile ""
  wait_for 10 redis redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping || die "redis did not answer; see $LOGS/redis.log"
}

write_env_file() {
  cat >"$STATE/env" <<ENV
# Sourced by the e2e suite and make targets: . $STATE/env
export KUBECONFIG=$KUBECONFIG_ADMIN
export LOCKEDCRON_CLUSTER_DIR=$STATE
export LOCKEDCRON_E2E_REDIS_HOST_URL=redis://127.0.0.1:$REDIS_PORT/0
export LOCKEDCRON_E2E_REDIS_POD_URL=redis://$POD_GATEWAY:$REDIS_PORT/0
export LOCKEDCRON_CTR_ADDRESS=$CTR_SOCK
ENV
}
