#!/usr/bin/env bash
# Times CI as a fresh machine would run it: a fresh clone of this repository's HEAD, and
# every build cache empty (Go's build and module caches, GOPATH, the Kubernetes binaries
# and helm), in COLD (default /tmp/lockedcron-cold, emptied first). Debian packages are
# not removed: hack/install-deps.sh installs them in a minute or two on a fresh machine.
#
#   hack/ci-cold.sh        prints the commit, the elapsed seconds and .ci/run's exit code
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
COLD=${COLD:-/tmp/lockedcron-cold}
rm -rf "$COLD" && mkdir -p "$COLD"/{gocache,gomod,gopath,cache,xdg}
export GOCACHE=$COLD/gocache GOMODCACHE=$COLD/gomod GOPATH=$COLD/gopath LOCKEDCRON_CACHE=$COLD/cache XDG_CACHE_HOME=$COLD/xdg CI=true
git clone -q "$repo" "$COLD/src" && cd "$COLD/src" || exit 1
echo "cold CI of $(git log --oneline -1 | cut -c1-72), from $(date -u +%H:%M:%S)"
start=$(date +%s)
bash .ci/run
rc=$?
echo "cold CI: RC=$rc in $(( $(date +%s) - start )) s"
exit $rc
