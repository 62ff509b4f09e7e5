# webapp-operator: run `make help` for the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= webapp-operator:dev
# Every Go build and test here is static and path-trimmed, as the image's manager and the tools' builds are: Go's
# build cache then serves the packages they share (Kubernetes' client libraries, most of all) to all of them, and a
# cold make test compiles them once. (A plain `go test ./...` works too, in a build cache of its own.)
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell go env GOFLAGS)) -trimpath)
CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
# The generator and the linter, one binary per version in the cache outside the checkout (as the control plane's):
# a clean clone (CI's, a second worktree) compiles neither again; golangci-lint's cold compile is minutes.
TOOLBIN := $(or $(WEBAPP_TOOLS_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/webapp-operator)/bin
CONTROLLER_GEN := $(TOOLBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(TOOLBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# The local control plane's binaries (etcd, kube-apiserver, ..., kwok) are built once by test/tools/install.sh
# into a versioned cache outside the checkout (~/.cache/webapp-operator); WEBAPP_TOOLS_CACHE moves it.
# The generative test's seed and number of cases (make fuzz SEED=7 COUNT=1000).
SEED ?= 1
COUNT ?= 200
# The action test's number of steps (make fuzz-actions SEED=7 STEPS=200): sequences of 20 in fresh namespaces.
STEPS ?= 200
# The manager's build tags, as the Dockerfile (and test/images/build.sh, test/e2e) build it: fieldsv1string keeps
# each managedFields entry's field set interned, so cached objects of one shape share one copy (see "Scale").
MANAGER_TAGS := fieldsv1string
# The scale benchmark (make bench-scale): N WebApps beside U unrelated Deployments, the manager's resync, its
# workers (also the floor client's concurrency) and more manager flags (ARGS); the floor runs in a fresh cluster
# with the same load (FLOOR=same: in the operator's cluster afterwards, one preload instead of two; FLOOR=0: none).
N ?= 1000
U ?= 5000
RESYNC ?= 10s
WORKERS ?= 8
FLOOR ?= 1
# How many times bench-scale measures (the median of each figure is printed), and when it gives up.
RUNS ?= 3
BENCH_TIMEOUT ?= 3h
# How long the whole test run may take (go test -timeout).
TEST_TIMEOUT ?= 40m
# The local cluster's node: kwok (a fake node, fast) or real (containerd, kubelet, kube-proxy; needs root).
NODE ?= kwok
REALNODE_PKG := ./test/realnode

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy, apply configurations, the CRD, the RBAC ClusterRole, the chart's copies of both and the API reference (docs/api-reference.md).
	rm -rf applyconfig
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt applyconfiguration:headerFile=hack/boilerplate.go.txt paths=./apis/...
	$(CONTROLLER_GEN) crd output:crd:artifacts:config=manifests/crd paths=./apis/...
	$(CONTROLLER_GEN) rbac:roleName=webapp-operator output:rbac:artifacts:config=manifests/rbac paths=./controller/... paths=./conversion/...
	go fmt ./apis/... ./applyconfig/... >/dev/null
	@# The conversion's copy of the CRD: it holds data restored by a conversion to v2's schema.
	cp manifests/crd/example.com_webapps.yaml conversion/webapps.crd.yaml
	@# The Helm chart's CRD and RBAC rules, from the same files as the kustomize tree's.
	go run ./hack/genchart
	@# The API reference, from the same types and markers as the CRD.
	go run ./hack/apidocs > docs/api-reference.md
	@# The manager's dependencies, compiled by the Dockerfile in a layer that only go.mod, go.sum and this list key (sorted: a
	@# package moved inside the operator leaves it as it is).
	go list -deps -tags=$(MANAGER_TAGS) -f '{{if not .Standard}}{{.ImportPath}}{{end}}' . | grep -v '^github.com/example/webapp-operator' | LC_ALL=C sort > hack/image-deps.txt

.PHONY: verify
verify: verify-generated verify-versions verify-chart ## Fail when generated code, go.mod or the Helm chart is stale.

.PHONY: verify-versions
verify-versions: ## Fail when go.mod and test/tools/go.mod select different versions of a library both build (a cold make test would compile it twice).
	hack/versions.sh

.PHONY: verify-generated
verify-generated: generate
	go mod tidy
	@if [ -n "$$(git status --porcelain -- apis applyconfig manifests conversion/webapps.crd.yaml go.mod go.sum hack/image-deps.txt docs/api-reference.md)" ]; then \
		git status --porcelain -- apis applyconfig manifests conversion/webapps.crd.yaml go.mod go.sum hack/image-deps.txt docs/api-reference.md; git --no-pager diff --stat; \
		echo "generated files are stale: run 'make generate' (and 'go mod tidy') and commit the result" >&2; exit 1; fi

.PHONY: verify-chart
# helm and kustomize are built from the tools module (test/tools) on the first run into the cache, before the tests.
verify-chart: ## Fail when the Helm chart renders other objects than the kustomize tree, fails helm lint, or its schema lets bad values through.
	go run ./test/cmd/tools helm kustomize >/dev/null
	WEBAPP_NO_BUILD=1 go test -count=1 ./test/chart

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (config in .golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: tools
tools: ## Build the local control plane's binaries into the cache (once) and print where they are.
	@test/tools/install.sh

.PHONY: test
test: ## Run every test: unit, integration (real API server), end-to-end (kwok nodes), then the real node's; a table of what each phase took.
	TEST_TIMEOUT=$(TEST_TIMEOUT) hack/test.sh

# How many cores test-cold pins make test to (1: half of a 2-core machine).
CPUS ?= 1

.PHONY: test-cold
test-cold: ## Run make test as a newcomer's first run: a clean clone of HEAD, an empty HOME (no cache of any kind), pinned to CPUS cores (hack/cold.sh; -r, -C: see it).
	hack/cold.sh -c $(CPUS)

.PHONY: test-realnode
# The timeout covers the image builds too: a cold build of the operator's image took 25 minutes on a busy machine.
test-realnode: ## Run the end-to-end tests on a real node (root): the operator's image, make deploy, real pods.
	bin=$$(test/tools/install.sh) && WEBAPP_TOOLS_BIN="$$bin" go test -timeout 60m -count=1 -v $(REALNODE_PKG)

.PHONY: fuzz
fuzz: ## Run the generative promise test on a real API server: COUNT random WebApps from SEED (a failure prints a WebApp to apply).
	bin=$$(test/tools/install.sh) && \
		KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$bin}" WEBAPP_TOOLS_BIN="$$bin" WEBAPP_FUZZ_SEED=$(SEED) WEBAPP_FUZZ_COUNT=$(COUNT) \
		go test -timeout $(TEST_TIMEOUT) -count=1 -v -run '^TestEveryAcceptedWebAppConvergesThenCostsZeroWrites$$' ./test/integration

.PHONY: fuzz-actions
fuzz-actions: ## Run the action test on a local cluster: STEPS random actions of other actors from SEED (a failure prints the steps as kubectl commands).
	bin=$$(test/tools/install.sh) && \
		WEBAPP_TOOLS_BIN="$$bin" WEBAPP_ACTIONS_SEED=$(SEED) WEBAPP_ACTIONS_STEPS=$(STEPS) \
		go test -timeout $(TEST_TIMEOUT) -count=1 -v -run '^TestRandomActionsKeepTheInvariants$$' ./test/actions

.PHONY: fuzz-conversion
fuzz-conversion: ## Run the conversion action test on a real API server: STEPS random v1 and v2 client actions from SEED (a failure prints them as kubectl commands).
	bin=$$(test/tools/install.sh) && \
		KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$bin}" WEBAPP_TOOLS_BIN="$$bin" WEBAPP_CONVERSION_SEED=$(SEED) WEBAPP_CONVERSION_STEPS=$(STEPS) \
		go test -timeout $(TEST_TIMEOUT) -count=1 -v -run '^TestV1ActionsChangeOnlyWhatTheyMean$$' ./test/integration

.PHONY: test-unit
test-unit: ## Run the unit tests only (no control plane).
	go test -count=1 ./apis/... ./controller/... ./conversion/... ./hack/nobuild

# How long `make fuzz-builders` searches.
FUZZTIME ?= 1m

.PHONY: fuzz-builders
fuzz-builders: ## Fuzz the builders for FUZZTIME (the seeds run in every `go test`).
	go test -run '^$$' -fuzz '^FuzzBuilders$$' -fuzztime $(FUZZTIME) ./controller/

.PHONY: bench
bench: ## Run the benchmarks and print their figures.
	go test -run '^$$' -bench . -benchmem ./controller/... ./conversion/...

.PHONY: bench-scale
bench-scale: build ## Measure N WebApps beside U Deployments against the floor, RUNS times, on local clusters (N= U= RESYNC= WORKERS= ARGS= FLOOR=1|same|0 RUNS=3 BENCH_TIMEOUT=3h; minutes).
	bin=$$(test/tools/install.sh) && go build -o bin/benchscale ./test/cmd/benchscale && \
		WEBAPP_TOOLS_BIN="$$bin" bin/benchscale -n $(N) -u $(U) -resync $(RESYNC) -workers $(WORKERS) -runs $(RUNS) -timeout $(BENCH_TIMEOUT) \
		-floor=$$( [ "$(FLOOR)" = 0 ] && echo false || echo true ) -fresh-floor=$$( [ "$(FLOOR)" = same ] && echo false || echo true ) \
		-args "$(ARGS)"

##@ Build and run

.PHONY: build
build: ## Build the manager binary into bin/manager.
	CGO_ENABLED=0 go build -trimpath -tags=$(MANAGER_TAGS) -o bin/manager .

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-webapp (then: export PATH=$$PWD/bin:$$PATH; kubectl webapp get NAME).
	CGO_ENABLED=0 go build -trimpath -o bin/kubectl-webapp ./cmd/kubectl-webapp

.PHONY: run
run: build ## Run the manager against $$KUBECONFIG / ~/.kube/config, or a local cluster it starts (NODE=real: a real node; ARGS: manager flags).
	NODE=$(NODE) hack/run.sh $(ARGS)

.PHONY: cluster-up
cluster-up: ## Start the local cluster (etcd, apiserver, controller-manager, scheduler, kwok; NODE=real: a real node) in the background.
	go build -o bin/localcluster ./test/cmd/localcluster
	bin/localcluster up $(NODE)

.PHONY: cluster-down
cluster-down: ## Stop the local cluster started by `make run` or `make cluster-up`.
	go build -o bin/localcluster ./test/cmd/localcluster
	bin/localcluster down $(NODE)

.PHONY: install
install: ## Install the CRD (conversion by the operator's webhook Service) into the cluster of the current kubeconfig.
	kubectl apply --server-side -k manifests/crd

.PHONY: uninstall
uninstall: ## Remove the CRD (and with it every WebApp) from the cluster.
	kubectl delete --ignore-not-found -f manifests/crd/example.com_webapps.yaml

.PHONY: deploy
deploy: ## Install CRD, RBAC and the operator's Deployment (image $(IMG)).
	kubectl apply --server-side -k manifests

.PHONY: undeploy
undeploy: ## Remove what deploy installed.
	kubectl delete --ignore-not-found -k manifests

.PHONY: docker-build
docker-build: ## Build the container image $(IMG) (DOCKER_BUILD_ARGS: extra docker build flags).
	docker build $(DOCKER_BUILD_ARGS) -t $(IMG) .

# Each installed into a directory of its own, then renamed into place: two checkouts may install at once.
$(CONTROLLER_GEN):
	mkdir -p $(TOOLBIN)
	tmp=$$(mktemp -d "$(TOOLBIN)/.install.XXXXXX") && GOBIN=$$tmp go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) && \
		mv $$tmp/controller-gen $@ && rmdir $$tmp

$(GOLANGCI_LINT):
	mkdir -p $(TOOLBIN)
	tmp=$$(mktemp -d "$(TOOLBIN)/.install.XXXXXX") && GOBIN=$$tmp go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) && \
		mv $$tmp/golangci-lint $@ && rmdir $$tmp
