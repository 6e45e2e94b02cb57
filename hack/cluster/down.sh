#!/usr/bin/env bash
# Tears the local cluster down and leaves no process, mount, cgroup, link or iptables rule behind:
#   hack/cluster/down.sh [--purge] [--keep-going]
# Stops each daemon by its recorded PID (TERM, grace, KILL), kills what is left in the pods'
# cgroups and the containerd shims (by their pid files), unmounts everything under the state
# folder, removes the kubepods cgroups, KUBE-/CNI- iptables chains and cni0, restores
# net.ipv4.ip_forward and removes the paths outside the state folder that were absent before up.
# Keeps $STATE/pki, the kubeconfigs, $STATE/images and $STATE/logs (for the next up, and to read);
# --purge removes the whole state folder. Ends with a check that exits 1 if anything is left.
source "$(dirname "$0")/lib.sh"
need_root
purge=0
for a in "$@"; do
  case $a in --purge) purge=1 ;; --keep-going) ;; *) die "usage: down.sh [--purge]" ;; esac
done
t0=$SECONDS
rm -f "$RUN/up.complete"

# 1. the kubelet first (so it restarts nothing), then the control plane
for d in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_daemon "$d" 10; done
# 1b. a daemon that lost its pid file (started a second time over it: two overlapping
#     restarts of kube-apiserver in a soak once left one running, which the next up then
#     talked to), found by the state folder on its command line
for f in $(grep -laF -f <(printf '%s/\n' "$STATE") /proc/[0-9]*/cmdline 2>/dev/null); do
  d=${f%/cmdline}
  exe=$(readlink "$d/exe" 2>/dev/null) || continue
  case $exe in
    */kube-apiserver | */kube-controller-manager | */kube-scheduler | */kubelet | */etcd)
      log "stopping a stray ${exe##*/} without a pid file (pid ${d#/proc/})"
      stop_pid "${exe##*/}" "${d#/proc/}" 10 ;;
  esac
done

# 2. containers: ask containerd to kill and remove them while it still runs
if pid_of containerd >/dev/null && [ -S "$CTR_SOCK" ]; then
  for t in $(timeout 10 ctr --address "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    timeout 10 ctr --address "$CTR_SOCK" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  for t in $(timeout 10 ctr --address "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    timeout 10 ctr --address "$CTR_SOCK" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
  done
  for c in $(timeout 10 ctr --address "$CTR_SOCK" -n k8s.io containers ls -q 2>/dev/null); do
    timeout 10 ctr --address "$CTR_SOCK" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
  done
fi

# 3. whatever still runs in a pod cgroup is a container process of this cluster: KILL it
kubepods_cgroups() { find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods -depth -type d 2>/dev/null || true; }
for _ in 1 2 3 4 5; do
  pids=$(for cg in $(kubepods_cgroups); do cat "$cg/cgroup.procs" 2>/dev/null; done | sort -u)
  [ -z "$pids" ] && break
  log "killing leftover container processes: $(echo $pids)"
  kill -KILL $pids 2>/dev/null || true
  sleep 0.3
done

# 4. containerd shims: by the pid files in containerd's state folder, and any shim serving this
#    cluster's containerd socket (a shim outlives a crashed containerd), then containerd
shims=$(cat "$STATE"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid 2>/dev/null || true)
for f in $(grep -laF -f <(echo "$CTR_SOCK") /proc/[0-9]*/cmdline 2>/dev/null); do
  shims="$shims ${f//[^0-9]/}"
done
for pid in $(echo $shims | tr ' ' '\n' | sort -u); do
  case $(readlink "/proc/$pid/exe" 2>/dev/null) in */containerd-shim*) stop_pid shim "$pid" 3 ;; esac
done
stop_daemon containerd 10
stop_daemon redis 5

# 5. mounts under the state folder (the kubelet bind-mounts its root dir onto itself; overlay
#    rootfs, netns, shm, volumes), deepest first, until none is left
for _ in 1 2 3 4 5; do
  mps=$(awk -v s="$STATE" '$5 == s || index($5, s "/") == 1 {print $5}' /proc/self/mountinfo | sort -r -u)
  [ -z "$mps" ] && break
  for m in $mps; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
done

# 6. cgroups (deepest first; only empty ones can go)
for _ in 1 2 3; do
  cgs=$(kubepods_cgroups)
  [ -z "$cgs" ] && break
  for cg in $cgs; do rmdir "$cg" 2>/dev/null || true; done
  sleep 0.2
done

# 7. iptables: rules that jump to KUBE-/CNI- chains, then those chains
strip_chains() { # iptables|ip6tables
  local ipt=$1 t rule c
  command -v "$ipt" >/dev/null || return 0
  for t in filter nat mangle raw; do
    "$ipt" -t "$t" -S >/dev/null 2>&1 || continue
    while IFS= read -r rule; do
      eval "$ipt -t $t -D ${rule#-A }" 2>/dev/null || true
    done < <("$ipt" -t "$t" -S | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE-|CNI-)' || true)
    for c in $("$ipt" -t "$t" -S | awk '$1 == "-N" && ($2 ~ /^(KUBE-|CNI-)/) {print $2}'); do
      "$ipt" -t "$t" -F "$c" 2>/dev/null || true
    done
    for c in $("$ipt" -t "$t" -S | awk '$1 == "-N" && ($2 ~ /^(KUBE-|CNI-)/) {print $2}'); do
      "$ipt" -t "$t" -X "$c" 2>/dev/null || true
    done
  done
}
strip_chains iptables
strip_chains ip6tables

# 8. links: veths on the bridge, then the bridge
if ip link show "$BRIDGE" >/dev/null 2>&1; then
  for v in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$v" 2>/dev/null || true
  done
  ip link del "$BRIDGE"
fi

# 9. sysctl and the paths outside the state folder that we created
if [ -f "$STATE/preexisting" ]; then
  fwd=$(sed -n 's/^ip_forward=//p' "$STATE/preexisting")
  [ -n "$fwd" ] && echo "$fwd" >/proc/sys/net/ipv4/ip_forward
  for p in "${FOREIGN_PATHS[@]}"; do
    grep -qxF "$p" "$STATE/preexisting" && continue
    [ -e "$p" ] || continue
    if awk -v s="$p" 'index($5, s "/") == 1 || $5 == s {found=1} END {exit !found}' /proc/self/mountinfo; then
      log "WARNING: not removing $p: something is mounted under it"; continue
    fi
    rm -rf "$p"
  done
  # CNI results of this network, in case /var/lib/cni existed before
  rm -f /var/lib/cni/results/lockedcron-* 2>/dev/null || true
fi

# 10. runtime state
rm -rf "$RUN" "$STATE/etcd" "$STATE/kubelet" "$STATE/containerd" "$STATE/cni" "$STATE/pod-logs" \
         "$STATE/volume-plugins" "$STATE/redis" "$STATE/env"

# 11. check (the record of what existed before up goes only once nothing is left)
if "$CLUSTER_HACK/check-clean.sh"; then
  rm -f "$STATE/preexisting"
  [ $purge = 1 ] && rm -rf "$STATE"
  log "cluster down in $((SECONDS - t0))s, nothing left behind"
else
  log "cluster down in $((SECONDS - t0))s, but something is left (above); run down.sh again"
  exit 1
fi
