# rdma-macvlan: see `make help`.
SHELL := bash
GO ?= go
BIN := build/bin
TOOLS := build/tools
STATICCHECK_VERSION := v0.8.2
PLUGIN_NAME ?= rdma-macvlan

export PLUGIN_NAME

.PHONY: help build test test-root lint check plugin install clean deps

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build the daemon into build/bin
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/rdma-macvlan ./cmd/rdma-macvlan

test: ## unit tests (any user; privileged tests skip without root)
	$(GO) test -race -count=1 ./...

test-root: ## privileged tests: real namespaces, links and socket (root); fails if none ran
	bash scripts/test-root.sh

$(TOOLS)/staticcheck:
	GOBIN=$(abspath $(TOOLS)) GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(TOOLS)/staticcheck ## gofmt, go vet, staticcheck (pinned), shellcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	shellcheck scripts/*.sh .ci/run

plugin: ## build the managed plugin and create $(PLUGIN_NAME):latest on the daemon DOCKER_HOST points at (FORCE=1 replaces it)
	bash scripts/plugin.sh build && bash scripts/plugin.sh create $(if $(FORCE),-f)

install: ## plugin + the host directories its mounts need + enable it
	bash scripts/plugin.sh build && bash scripts/plugin.sh install $(if $(FORCE),-f)

deps: ## install the Debian packages the tests need (idempotent)
	bash scripts/deps.sh

check: deps lint test test-root ## everything CI runs (as root): the README's test command

clean: ## remove build output
	rm -rf build
