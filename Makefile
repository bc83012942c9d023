# Switchboard. `make help` lists the targets.
SHELL := bash
GO ?= go
# Seeds the sim runs at a time (make sim, make soak): one per core.
SIM_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin/switchboard
export SWITCHBOARD_TEST_POSTGRES ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable

# make run: a node on the embedded store, API on https://localhost:8443.
RUN_FLAGS ?= --name local --data-dir ./data --listen 127.0.0.1:8443 --metrics-listen 127.0.0.1:9568

.PHONY: help build run test test-short bench lint clean demo sim soak

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/switchboard
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/node

run: build ## run a node on the embedded store (RUN_FLAGS to change flags)
	$(BIN) run $(RUN_FLAGS)

demo: build ## three federated nodes on loopback with mTLS (scripts/demo.sh); Ctrl-C stops them
	BIN=$(BIN) bash scripts/demo.sh

test: ## all tests with -race (starts Postgres when it is down; installs Chromium, promtool and python3 when missing)
	.ci/postgres
	scripts/chromium.sh
	scripts/debian-package.sh "SMPP interop tests" "perl -MNet::SMPP -e 1" libnet-smpp-perl
	scripts/debian-package.sh "promtool checks of deploy/" "command -v promtool" prometheus
	scripts/debian-package.sh "test of the docs' Python webhook receiver" "python3 -c 'import hashlib, hmac'" python3
	$(GO) test -race -count=1 -timeout 25m ./...

test-short: ## quick tests without -race
	.ci/postgres
	$(GO) test -count=1 -timeout 10m ./...

.PHONY: screenshot
screenshot: ## re-take docs/ui-queue.png (the README's picture) with the web UI's browser test
	scripts/chromium.sh
	SWITCHBOARD_UI_SCREENSHOT=$(CURDIR)/docs/ui-queue.png $(GO) test -count=1 -run '^TestUIInBrowser$$' .

sim: ## sim harness on virtual time: 20 random seeds of 5 nodes (5 min each), a 20-node mesh, 20 ring-failover seeds, every named scenario
	$(GO) run ./cmd/sim --seeds $${SIM_SEEDS:-20} --nodes $${SIM_NODES:-5} --duration 5m --faults random --jobs $(SIM_JOBS)
	$(GO) run ./cmd/sim --seed 1 --nodes 20 --duration 5m --clients 8 --faults random
	$(GO) run ./cmd/sim --seeds $${SIM_RING_SEEDS:-20} --nodes 2 --faults ring-failover --jobs $(SIM_JOBS)
	SIM_SCENARIOS=all $(GO) test -count=1 -timeout 1h -run '^TestScenarios$$' ./sim/

soak: ## long runs behind make test: retention soak (SOAK_CYCLES, SOAK_RATE), fuzzing, the sim's large seed counts (SIM_SOAK_SEEDS of 5 nodes, SIM_SOAK_SEEDS_20 of 20; thousands of messages a seed; docs/sim.md)
	$(GO) run ./cmd/sim --seeds $${SIM_SOAK_SEEDS:-1000} --nodes 5 --duration $${SIM_SOAK_DURATION:-5m} --faults random --jobs $(SIM_JOBS)
	$(GO) run ./cmd/sim --seeds $${SIM_SOAK_SEEDS_20:-20} --nodes 20 --duration $${SIM_SOAK_DURATION_20:-2m} --clients 8 --faults random --jobs $(SIM_JOBS)
	$(GO) test -tags soak -count=1 -timeout 30m -run '^TestSoak' -v ./cmd/node
	scripts/fuzz.sh $${FUZZ_TIME:-60s}

bench: build ## benchmarks: prints `bench:` ratio lines (docs/performance.md)
	.ci/postgres
	$(GO) run ./cmd/bench

lint: ## go vet, gofmt and the import rules (docs/architecture.md)
	$(GO) vet ./...
	$(GO) vet -tags soak ./cmd/node/
	$(GO) vet -tags simbug ./sim/ ./httpapi/
	GOOS=darwin $(GO) vet ./...  # the library and the binaries build off Linux too (README)
	GOOS=windows $(GO) vet ./...
	$(GO) test -count=1 ./architecture/
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean: ## remove build output and the default data dir
	rm -rf bin data
