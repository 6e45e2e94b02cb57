#!/usr/bin/env bash
# Fails when `make manifests generate` changed generated files (CRD, RBAC, DeepCopy, Grafana dashboard):
# markers were edited without committing what they generate, or dist/ (make build-installer)
# is stale. Run after those targets.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
# dist/: the install bundle and the chart's generated parts, rewritten here from config/.
hack/build-installer.sh 2>/dev/null
hack/chart-sync.sh
paths=(config/crd/bases config/rbac api/v1alpha1/zz_generated.deepcopy.go config/grafana dist)
if ! git diff --quiet HEAD -- "${paths[@]}" || [ -n "$(git ls-files --others --exclude-standard -- "${paths[@]}")" ]; then
  msg "'make manifests generate build-installer' changed generated files; commit them:"
  git status --short -- "${paths[@]}" >&2
  git diff --stat HEAD -- "${paths[@]}" >&2
  exit 1
fi
