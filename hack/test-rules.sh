#!/usr/bin/env bash
# Tests the alert rules of config/prometheus/prometheusrule.yaml with promtool (Debian
# package prometheus, installed by hack/install-deps.sh): extracts spec.groups into a
# plain rule file (hack/promrules), checks it, and runs test/prometheus/rules_test.yaml.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
command -v promtool >/dev/null || fail "promtool not found: run hack/install-deps.sh (Debian package prometheus)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./hack/promrules -o "$tmp/rules.yaml" config/prometheus/prometheusrule.yaml
cp test/prometheus/rules_test.yaml "$tmp/"
promtool check rules "$tmp/rules.yaml"
promtool test rules "$tmp/rules_test.yaml"
