# lockedcron — see README.md. `make help` lists the targets.

IMG ?= k8s.local/lockedcron:dev
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GO ?= go
# Short fuzz runs inside `make test`: a count of inputs per target (10-25 s each here); raise for a
# real fuzzing session. A count, not a duration: with a duration, Go 1.26's fuzz coordinator can fail
# a clean run with "context deadline exceeded" at the deadline (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 50000x

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen dashboard ## Generate the CRD and RBAC from markers (and the Grafana dashboard).
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:generateEmbeddedObjectMeta=true paths="./api/...;./internal/controller/...;./cmd/manager/..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## go fmt.
	$(GO) fmt ./...

.PHONY: vet
vet: ## go vet.
	$(GO) vet ./...

.PHONY: verify-generated
verify-generated: ## Fail when the generated CRD, RBAC or DeepCopy differ from what is committed.
	@hack/verify-generated.sh

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd from Go modules into the version-keyed cache (once).
	@hack/k8s-binaries.sh >/dev/null

.PHONY: test
test: manifests generate fmt vet verify-generated envtest-assets test-monitoring ## Everything: unit, real-Redis, envtest, short fuzz runs, end-to-end on a local cluster.
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) test ./... -count=1 -timeout 20m
	$(MAKE) fuzz
	$(MAKE) test-e2e
	$(MAKE) soak-short
	$(MAKE) soak-sentinel-short

.PHONY: test-unit
test-unit: manifests generate fmt vet envtest-assets ## `make test` without fuzzing and end-to-end.
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) test ./... -count=1 -timeout 20m

.PHONY: test-e2e
test-e2e: manifests ## End-to-end suite on the local cluster (brought up, and down again, if not running).
	hack/e2e.sh

.PHONY: fuzz
fuzz: ## Run each fuzz target briefly (FUZZTIME inputs each, default 50000x).
	@hack/fuzz.sh $(FUZZTIME)

.PHONY: bench
bench: ## Benchmarks (schedule maths, lock round trips against a loopback Redis; lockwrap's start-up cost and round trips per run).
	$(GO) test ./... -run '^$$' -bench . -benchmem
	hack/bench-lockwrap.sh

.PHONY: bench-lock
bench-lock: ## The lock cycle vs bsm/redislock and go-redsync on one Redis (module test/bench/lock; BENCH_LOCK_ARGS='-rounds 9 -n 3000').
	cd test/bench/lock && $(GO) run . $(BENCH_LOCK_ARGS)

##@ Monitoring

.PHONY: dashboard
dashboard: ## Generate the Grafana dashboard config/grafana/lockedcron.json (hack/dashboard, its own module).
	cd hack/dashboard && $(GO) run . -o ../../config/grafana/lockedcron.json

.PHONY: test-monitoring
test-monitoring: ## promtool tests of the alert rules; the dashboard's queries checked against the metrics; bench-lock runs its cycles once.
	hack/test-rules.sh
	cd hack/dashboard && $(GO) vet ./... && $(GO) test ./... -count=1
	cd test/bench/lock && $(GO) vet ./... && $(GO) test ./... -count=1

##@ Demo and local cluster

.PHONY: demo
demo: manifests ## Run the sample job in two namespaces on a cluster (a local one when none is configured).
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Remove what `make demo` made (on a reachable cluster: the samples; the operator stays).
	hack/demo.sh down

.PHONY: cluster-up
cluster-up: ## Bring up the local single-node cluster (hack/cluster/up.sh).
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Tear the local cluster down, leaving nothing behind.
	hack/cluster/down.sh

.PHONY: images
images: ## Build the image tarballs (and import them into the local cluster when it runs).
	hack/cluster/images.sh

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager, lockwrap and kubectl-lockedcron binaries (static).
	CGO_ENABLED=0 $(GO) build -trimpath -o $(LOCALBIN)/manager ./cmd/manager
	CGO_ENABLED=0 $(GO) build -trimpath -o $(LOCALBIN)/lockwrap ./cmd/lockwrap
	CGO_ENABLED=0 $(GO) build -trimpath -o $(LOCALBIN)/kubectl-lockedcron ./cmd/kubectl-lockedcron

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster in KUBECONFIG.
	$(GO) run ./cmd/manager --leader-elect=false

##@ Deployment

.PHONY: install
install: manifests ## Install the CRD into the cluster in KUBECONFIG.
	kubectl apply --server-side -k config/crd

.PHONY: uninstall
uninstall: manifests ## Remove the CRD.
	kubectl delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the operator (config/default) to the cluster in KUBECONFIG.
	kubectl apply --server-side -k config/default

.PHONY: undeploy
undeploy: ## Remove the operator.
	kubectl delete --ignore-not-found -k config/default

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into ./bin.
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

##@ Benchmarks at scale (issue 13)

N ?= 20,1000
.PHONY: bench-scale
bench-scale: manifests ## Creation lag, API calls, RSS/CPU: manager vs kube-controller-manager's CronJob controller on one apiserver (N=20,1000,5000 …).
	N=$(N) hack/bench-scale.sh

.PHONY: bench-start
bench-start: manifests ## Start lag on the local cluster: lockedcron (with and without prepareAheadSeconds) vs native CronJob (M=30).
	hack/bench-start.sh

##@ Soak (issue 14: chaos soak with an external checker)

# DURATION and SEED of `make soak` / `make soak-short` (SEED empty: drawn and printed).
DURATION ?= 40m
SEED ?=
SOAK_SHORT_DURATION ?= 4m
# The fewest contended occurrences of the main key a soak must have decided (the 40-minute
# default at "*/2 * * * * *" schedules 1,200).
SOAK_MIN_OCCURRENCES ?= 1000

.PHONY: soak
soak: manifests ## Chaos soak on the local cluster, checked from the outside (DURATION, default 40m; SEED; SOAK_MIN_OCCURRENCES, default 1000). See docs/reliability.md.
	DURATION=$(DURATION) SEED=$(SEED) SOAK_MIN_OCCURRENCES=$(SOAK_MIN_OCCURRENCES) hack/soak.sh

.PHONY: soak-short
soak-short: manifests ## The short soak (4 min, >= 100 contended occurrences) that `make test` runs.
	DURATION=$(SOAK_SHORT_DURATION) SEED=$(SEED) SOAK_MIN_OCCURRENCES=100 hack/soak.sh

# The Sentinel soak: lockwrap on a master, two replicas and three sentinels, --min-replicas 2,
# under failovers; no cluster (the default 20 minutes at "*/2 * * * * *" decide 600 occurrences).
SENTINEL_DURATION ?= 20m

.PHONY: soak-sentinel
soak-sentinel: ## Chaos soak of the lock on Redis Sentinel (failovers, frozen servers), checked from the outside (SENTINEL_DURATION, default 20m; SEED). See docs/reliability.md.
	DURATION=$(SENTINEL_DURATION) SEED=$(SEED) SOAK_MIN_OCCURRENCES=500 hack/soak-sentinel.sh

.PHONY: soak-sentinel-short
soak-sentinel-short: ## The short Sentinel soak (3 min, >= 75 contended occurrences) that `make test` runs.
	DURATION=3m SEED=$(SEED) SOAK_MIN_OCCURRENCES=75 hack/soak-sentinel.sh

##@ Install bundle and Helm chart

.PHONY: build-installer
build-installer: manifests ## Write dist/install.yaml (config/default with image IMG) and sync dist/chart from config/.
	IMG=$(IMG) hack/build-installer.sh
	hack/chart-sync.sh

.PHONY: helm
helm: ## Build helm from its Go module into the version-keyed cache (once); prints its path.
	@hack/helm.sh

.PHONY: helm-lint
helm-lint: build-installer ## helm lint dist/chart.
	"$$(hack/helm.sh)" lint --strict dist/chart

.PHONY: bench-failover
bench-failover: envtest-assets ## Failover gap with two manager processes on envtest (leader stopped gracefully and killed).
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" $(GO) run ./hack/failover -rounds 3
