#!/usr/bin/env bash
# Builds helm from its Go module (helm.sh/helm/v3) into the version-keyed cache outside
# the checkout, once, and prints the binary's path on stdout:
#
#   HELM=$(hack/helm.sh); $HELM lint dist/chart
#
# HELM_VERSION overrides the version (one cache folder per version).
source "$(dirname "$0")/lib.sh"
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CACHE=${LOCKEDCRON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockedcron}
out="$CACHE/helm-${HELM_VERSION}"
if [ ! -x "$out/helm" ]; then
  mkdir -p "$out"
  msg "building helm ${HELM_VERSION} (helm.sh/helm/v3/cmd/helm) into $out"
  start=$SECONDS
  # `go install pkg@version` builds outside this module: helm never enters our go.mod.
  (cd "$out" && GOFLAGS= CGO_ENABLED=0 GOBIN="$out/.bin" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}")
  mv "$out/.bin/helm" "$out/helm"
  rmdir "$out/.bin"
  msg "built helm in $((SECONDS - start))s"
fi
echo "$out/helm"
