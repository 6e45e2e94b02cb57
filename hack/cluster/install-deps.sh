#!/usr/bin/env bash
# Installs the Debian packages the local cluster needs, when missing (apt-get update only then).
set -euo pipefail
pkgs=(containerd runc containernetworking-plugins iptables conntrack ethtool socat iproute2 kmod ebtables redis-server redis-tools curl openssl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d 101: the packages must not start their own containerd or redis services
had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
[ $had_policy = 1 ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
rc=0; apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || rc=$?
[ $had_policy = 1 ] || rm -f /usr/sbin/policy-rc.d
exit $rc
