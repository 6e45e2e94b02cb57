#!/usr/bin/env bash
# Writes dist/chart's generated parts (CRD, manager RBAC, admission policy) from config/
# (hack/chartgen). hack/chartgen's TestChartInSync and hack/verify-generated.sh check them.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
go run ./hack/chartgen
