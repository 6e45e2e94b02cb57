#!/usr/bin/env bash
# Reports anything the local cluster left behind; exits 1 if there is something.
# Used at the end of down.sh; run it by hand after a teardown to verify.
source "$(dirname "$0")/lib.sh"
bad=0
report() { echo "LEFT: $*" >&2; bad=1; }
for f in "$RUN"/*.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f"); [ -d "/proc/$pid" ] && report "process $(basename "$f" .pid) pid $pid"
done
# any process with the state folder on its command line (every daemon and shim of this cluster
# has), any process of the cluster's Redis port; container processes show up as kubepods cgroups
for f in $(grep -laF -f <(printf '%s/\n' "$STATE") /proc/[0-9]*/cmdline 2>/dev/null); do
  d=${f%/cmdline}
  report "process ${d#/proc/} $(readlink "$d/exe" 2>/dev/null): $(tr '\0' ' ' 2>/dev/null <"$f" | cut -c1-160)"
done
for f in $(grep -laE -f <(printf '(:|--port.)%s([^0-9]|$)\n' "$REDIS_PORT") /proc/[0-9]*/cmdline 2>/dev/null); do
  d=${f%/cmdline}
  case $(readlink "$d/exe" 2>/dev/null) in
    */redis-server|*/redis-check-rdb) report "process ${d#/proc/} redis on port $REDIS_PORT" ;;
  esac
done
while read -r m; do report "mount $m"; done < <(awk -v s="$STATE" '$5 == s || index($5, s "/") == 1 {print $5}' /proc/self/mountinfo)
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do [ -d "$cg" ] && report "cgroup $cg"; done
ip link show "$BRIDGE" >/dev/null 2>&1 && report "link $BRIDGE"
v=$(ip -o link show type veth 2>/dev/null | awk -F': ' '$2 ~ /^veth/ {print $2}' | tr '\n' ' ')
[ -z "$v" ] || report "veth links (the bridge plugin's naming; check they are not someone else's): $v"
for ipt in iptables ip6tables; do
  for t in filter nat mangle raw; do
    n=$("$ipt" -t "$t" -S 2>/dev/null | grep -cE '(KUBE-|CNI-)' || true)
    [ "$n" = 0 ] || report "$ipt -t $t: $n KUBE-/CNI- rules or chains"
  done
done
if [ -f "$STATE/preexisting" ]; then
  for p in "${FOREIGN_PATHS[@]}"; do grep -qxF "$p" "$STATE/preexisting" || { [ -e "$p" ] && report "path $p"; }; done
fi
exit $bad
