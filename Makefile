# rdma-macvlan: see `make help`.
SHELL := bash
GO ?= go
BIN := build/bin
TOOLS := build/tools
STATICCHECK_VERSION := v0.8.2
PLUGIN_NAME ?= rdma-macvlan
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDVERSION := -X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=$(VERSION) -X github.com/rdma-macvlan/rdma-macvlan/internal/version.commit=$(COMMIT)
# make release REGISTRY=host[:port]/path: the plugin goes to $(REGISTRY)/rdma-macvlan.
REGISTRY ?=

export VERSION
# The binaries are built in a Go image (scripts/docker-build.sh) when BUILD=docker or there is no Go.
IN_DOCKER := $(if $(filter docker,$(BUILD)),1,$(if $(shell command -v $(GO)),,1))
CLI_PLUGINS_DIR ?= /usr/local/lib/docker/cli-plugins
# rdma-exec, which docker rdma run mounts into containers, and the OCI runtime rdma-macvlan-runtime
# (docker rdma runtime install registers it from there), on the engine's host.
HELPER_DIR ?= /usr/local/lib/rdma-macvlan

export PLUGIN_NAME

# The engines (E2E_ENGINES, E2E_ENDS, E2E_NEWEST) and a target per engine make check leaves out (e2e-v27),
# generated from internal/engines/engines.go.
include scripts/lib/engines.mk

FUZZTIME ?= 20

.PHONY: e2e-runtime release e2e-release e2e-reboot e2e-hca help build test test-root mutate test-kernel demo lint check plugin install install-cli e2e e2e-cli e2e-rails e2e-reliability e2e-bridge e2e-metrics e2e-compose fuzz bench clean deps

help: ## list the targets
	@echo 'Times on 2 cores, caches warm. PKGS: installs Debian packages, docker.io (Docker 20.10) among them,'
	@echo '  which replaces a docker-ce the host has: run it on a machine you can spare. ENGINES: starts its own'
	@echo '  dockerds (own data dirs, sockets and namespaces) and does not signal or reconfigure a dockerd the'
	@echo "  host runs (apt may start or stop no service while PKGS install). The host's dockerd: uses the engine"
	@echo '  DOCKER_HOST names.'
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## [1 min] build the daemon, the docker rdma CLI plugin, its rdma-exec helper and the OCI runtime into build/bin; without Go (or BUILD=docker) in a Go image (Dockerfile; 2 min)
ifeq ($(IN_DOCKER),1)
	COMMIT=$(COMMIT) bash scripts/docker-build.sh --bin $(BIN)
else
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDVERSION)" -o $(BIN)/rdma-macvlan ./cmd/rdma-macvlan
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDVERSION)" -o $(BIN)/docker-rdma ./cmd/docker-rdma
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDVERSION)" -o $(BIN)/rdma-exec ./cmd/rdma-exec
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDVERSION)" -o $(BIN)/rdma-macvlan-runtime ./cmd/rdma-macvlan-runtime
endif

test: ## [3 min] unit tests (any user; privileged tests skip without root)
	$(GO) test -race -count=1 ./...

test-root: ## [1 min; root] privileged tests: real namespaces, links and socket (root); fails if none ran
	bash scripts/test-root.sh

mutate: ## [12 min; root] mutation check: breaks guarded rules one at a time in a copy of the tree and fails unless a test catches each (root for the privileged ones)
	bash scripts/mutate.sh

test-kernel: ## [15 min, the first run 35; root; PKGS] the daemon, then Docker 20.10 and the current engine with the managed plugin, on a real kernel RDMA stack: Soft-RoCE in a qemu VM (root; the first run builds the VM image)
	bash scripts/engines.sh install $(E2E_NEWEST)
	bash test/kernel/vm/run.sh

demo: ## [5 min, the first run 25; root; PKGS] a narrated tour on a real kernel RDMA stack (Soft-RoCE VM, Docker 20.10): no RoCE hardware needed (root; the first run builds the VM image)
	bash test/kernel/vm/run.sh --demo

$(TOOLS)/staticcheck:
	GOBIN=$(abspath $(TOOLS)) GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(TOOLS)/staticcheck ## [1.5 min] gofmt, go vet, staticcheck (pinned), shellcheck, every README command block run by a test or saying why not, no shell function over 80 lines, every mutant applies (scripts/mutate.sh --check)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	shellcheck -x scripts/*.sh scripts/lib/*.sh test/e2e/*.sh test/e2e/lib/*.sh test/bench/*.sh test/kernel/vm/*.sh test/kernel/vm/init .ci/run
	bash scripts/readme-blocks.sh
	bash scripts/funclen.sh
	bash scripts/mutate.sh --check

plugin: ## [1 min; the host's dockerd] build the managed plugin and create $(PLUGIN_NAME):latest on the daemon DOCKER_HOST points at (FORCE=1 replaces it)
	bash scripts/plugin.sh build && bash scripts/plugin.sh create $(if $(FORCE),-f)

install: build ## [1 min, 2 without Go; root; the host's dockerd] plugin (FORCE=1 replaces it, keeping its settings; SETTINGS="k=v ..." sets more before it is enabled) + the host directories its mounts need + enable it + the docker rdma CLI plugin, rdma-exec and the runtime (install-cli); needs no Go (build)
	PLUGIN_BINARY=$(BIN)/rdma-macvlan bash scripts/plugin.sh build && PLUGIN_SETTINGS="$(SETTINGS)" bash scripts/plugin.sh install $(if $(FORCE),-f)
	$(INSTALL_CLI)

release: ## [2 min] static binaries, CLI plugin and managed plugin for linux/amd64 and arm64 with checksums into build/release; REGISTRY=host[:port]/path also pushes the plugin (REPO:VERSION, REPO:VERSION-arm64) through the daemon at DOCKER_HOST; without Go (or BUILD=docker) it builds in a Go image (Dockerfile)
	REGISTRY=$(REGISTRY) bash scripts/release.sh

install-cli: build ## [1 min; root for the default dirs] install docker rdma into CLI_PLUGINS_DIR (~/.docker/cli-plugins for one user), rdma-exec and rdma-macvlan-runtime into HELPER_DIR
	$(INSTALL_CLI)

define INSTALL_CLI
install -D -m 0755 $(BIN)/docker-rdma $(CLI_PLUGINS_DIR)/docker-rdma
install -D -m 0755 $(BIN)/rdma-exec $(HELPER_DIR)/rdma-exec
install -D -m 0755 $(BIN)/rdma-macvlan-runtime $(HELPER_DIR)/rdma-macvlan-runtime
endef

e2e: ## [30 min, engines built from source 15 more the first time; root; PKGS; ENGINES] end to end on private Docker engines (20.10, 28.5 and the current one; make e2e-v27 for 27.5): managed and legacy plugin, side by side with the built-in macvlan, the default bridge with iptables, two-node swarm, Prometheus scraping both plugins, a release installed from a local registry, host reboots (root)
	bash scripts/engines.sh install $(E2E_ENGINES) compose
	bash scripts/suites.sh test/e2e/e2e.sh -- test/e2e/e2e-diff.sh -- test/e2e/e2e-bridge.sh -- test/e2e/e2e-swarm.sh -- \
		test/e2e/e2e-metrics.sh -- test/e2e/e2e-compose.sh -- test/e2e/e2e-release.sh -- test/e2e/e2e-reboot.sh -- \
		test/e2e/e2e-hca.sh -- test/e2e/e2e-runtime.sh

e2e-runtime: ## [4 min; root; PKGS; ENGINES] (part of e2e) rdma-macvlan-runtime on Docker 20.10, 28.5 and the current engine: plain docker run and docker compose up RDMA-ready, other specs byte for byte, restarts, install and uninstall (root)
	bash scripts/engines.sh install $(E2E_ENGINES) compose
	bash test/e2e/e2e-runtime.sh

e2e-hca: ## [2 min; root; PKGS; ENGINES] (part of e2e) HCA names swapped under the parents, one address on two networks of a port, GID entries moved under a container, strict with two networks (root)
	bash scripts/engines.sh install $(E2E_ENDS)
	bash test/e2e/e2e-hca.sh

e2e-reboot: ## [3 min; root; PKGS; ENGINES] a host rebooted with the plugin installed as the README says (previous manifest upgraded, fresh install), on private engines in a private mount namespace (root)
	bash scripts/engines.sh install
	bash test/e2e/e2e-reboot.sh

e2e-release: ## [4 min; root; PKGS; ENGINES] a release to a local registry installed, used and upgraded as users do, on private engines (root)
	bash scripts/engines.sh install
	bash test/e2e/e2e-release.sh

e2e-bridge: ## [2 min; root; PKGS; ENGINES] (part of e2e) every engine with its default bridge, iptables and userland proxy in a private namespace: containers on the bridge and an rdma-macvlan network, published ports (root)
	bash scripts/engines.sh install $(E2E_ENGINES)
	bash test/e2e/e2e-bridge.sh

e2e-metrics: ## [1 min; root; PKGS; ENGINES] (part of e2e) a real Prometheus scrapes the managed plugin and the legacy daemon during a container life cycle; PromQL against /v1/status, promtool on a scrape and on examples/prometheus-rules.yml, one of its alerts made to fire (root)
	bash scripts/engines.sh install
	bash test/e2e/e2e-metrics.sh

e2e-compose: ## [1.5 min; root; PKGS; ENGINES] (part of e2e) docker rdma compose with Compose v2 (built from its module, cached) on private engines: a stack on two rdma-macvlan networks, the printed override with plain docker compose, down leaving nothing (root)
	bash scripts/engines.sh install $(E2E_ENDS) compose
	bash test/e2e/e2e-compose.sh

e2e-cli: ## [5 min; root; PKGS; ENGINES] docker rdma end to end on private engines (root), with containers on several rdma-macvlan networks (make e2e-rails)
	bash scripts/engines.sh install
	bash scripts/suites.sh test/e2e/e2e-cli.sh -- test/e2e/e2e-rails.sh

e2e-rails: ## [2 min; root; PKGS; ENGINES] (part of e2e-cli) containers on 2, 4 and 8 rdma-macvlan networks: every rail on every path, the container's own GID on every rail or a refusal (root)
	bash scripts/engines.sh install
	bash test/e2e/e2e-rails.sh

e2e-reliability: ## [4 min; root; PKGS; ENGINES] 50 containers at once, dockerd --live-restore restart, plugin upgrade, on private engines (root)
	bash scripts/engines.sh install
	bash test/e2e/e2e-reliability.sh

bench: ## [20 min; root; PKGS; ENGINES] benchmarks on real engines (root; about 20 min; BENCH_PARTS for some parts): prints a table, keeps the run in docs/bench/runs/, writes BENCHMARKS.md, docs/bench-*.png
	bash test/bench/bench.sh

fuzz: ## [2.5 min] fuzz every target for FUZZTIME seconds each (a crashing input is left in testdata/fuzz)
	bash scripts/fuzz.sh $(FUZZTIME)

deps: ## [1 min; root; PKGS] install the Debian packages the tests need (idempotent)
	bash scripts/deps.sh

check: ## [65 min warm; root; PKGS; ENGINES] everything CI runs (as root): the README's test command; deps, then lint test test-root mutate fuzz beside e2e-cli e2e-reliability e2e, then test-kernel; each stage timed, engines and VM image built in the background first (cold: more, while the current engine builds; not measured)
	bash scripts/check.sh

clean: ## remove build output
	rm -rf build
