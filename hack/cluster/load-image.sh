#!/usr/bin/env bash
# Imports an image tarball (docker-archive or OCI) into the local cluster's containerd, namespace
# k8s.io, and keeps a copy in $STATE/images so that the next up.sh imports it again.
#   hack/cluster/load-image.sh TARBALL...
source "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || die "usage: load-image.sh TARBALL..."
[ -S "$CTR_SOCK" ] || die "no containerd at $CTR_SOCK: run hack/cluster/up.sh first"
mkdir -p "$STATE/images"
for t in "$@"; do
  ctr_ -n k8s.io images import "$t"
  dest="$STATE/images/$(basename "$t")"
  [ "$(readlink -f "$t")" = "$(readlink -f "$dest")" ] || cp -f "$t" "$dest"
done
