#!/usr/bin/env bash
# Builds Kubernetes and etcd binaries from Go modules into a version-keyed cache outside
# the checkout, once. Prints the cache folder on stdout (for KUBEBUILDER_ASSETS).
#
#   hack/k8s-binaries.sh                 # kube-apiserver + etcd (what envtest needs)
#   hack/k8s-binaries.sh kubelet ...     # add more: kube-controller-manager kube-scheduler kubelet
#
# Versions come from hack/tools/{k8s,etcd}/go.mod; the cache key carries both.
source "$(dirname "$0")/lib.sh"
here=$REPO_ROOT/hack
K8S_VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/tools/k8s/go.mod")
ETCD_VERSION=$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/tools/etcd/go.mod")
CACHE=${LOCKEDCRON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockedcron}
out="$CACHE/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"
mkdir -p "$out"

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"

build() { # name moduledir package
  local name=$1 dir=$2 pkg=$3
  [ -x "$out/$name" ] && return 0
  echo "building $name ($pkg) into $out" >&2
  local start=$SECONDS
  (cd "$here/tools/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/.$name.tmp" "$pkg")
  mv "$out/.$name.tmp" "$out/$name"
  echo "built $name in $((SECONDS - start))s" >&2
}

components=(etcd kube-apiserver "$@")
for c in "${components[@]}"; do
  case $c in
    etcd) build etcd etcd go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy)
      build "$c" k8s "k8s.io/kubernetes/cmd/$c" ;;
    *) echo "k8s-binaries.sh: unknown component $c (want kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, etcd)" >&2; exit 2 ;;
  esac
done
# envtest looks for kubectl beside the others; the machine's kubectl serves.
if [ ! -e "$out/kubectl" ] && command -v kubectl >/dev/null; then ln -sf "$(command -v kubectl)" "$out/kubectl"; fi
echo "$out"
