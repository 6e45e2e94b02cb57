#!/usr/bin/env bash
# Installs the Debian packages the tests need, if missing: redis-server, redis-sentinel
# and redis-cli (the lock tests start real Redis, Sentinel and Cluster processes),
# openssl, and prometheus (promtool tests the alert rules; the e2e suite runs a real
# Prometheus server against the operator). Go and kubectl come with the machine. Needs root (or sudo) for apt-get.
source "$(dirname "$0")/lib.sh"
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-sentinel >/dev/null || need+=(redis-sentinel)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v openssl >/dev/null || need+=(openssl)
{ command -v promtool >/dev/null && command -v prometheus >/dev/null; } || need+=(prometheus)
command -v go >/dev/null || fail "Go 1.26 is required (https://go.dev/dl)"
if [ ${#need[@]} -gt 0 ]; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  msg "installing ${need[*]}"
  $sudo apt-get update -qq
  # Keep the packages from starting their own redis-server service on port 6379 (and
  # prometheus on 9090): tests start their own processes, and the local cluster's Redis
  # needs that port.
  had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  [ $had_policy = 1 ] || printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  [ $had_policy = 1 ] || $sudo chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
  [ $had_policy = 1 ] || $sudo rm -f /usr/sbin/policy-rc.d
fi
