# galago — build, run and test. `make run` and `make test` are the two
# set-up commands of the README: each installs what it needs on a fresh
# Debian machine.

SHELL    := /bin/bash
GO       ?= go
BIN      := bin/galago
PKGS     := ./...
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
RUN_DIR  ?= /tmp/galago-run
FUZZTIME ?= 3s

# Debian packages the tests need: BPF toolchain (make generate), real
# servers and tools for the privileged and end-to-end tiers.
TEST_DEBS := clang llvm libbpf-dev bpftool prometheus iptables iproute2 runc busybox-static curl nginx libnginx-mod-stream wrk redis-server redis-tools postgresql memcached libmemcached-tools python3 kcat systemd containerd openjdk-17-jdk-headless mount gcc libc6-dev mariadb-server unbound

.PHONY: all build run test test-deps unit privileged e2e fuzz lint generate check-generated bench bench-micro package image clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/galago
	ln -sf galago bin/gopher-ctl

# Builds galago and starts it on loopback (REST 127.0.0.1:9999, metrics
# 127.0.0.1:8888) with the example probes.init that enables what exists.
run: build
	mkdir -p $(RUN_DIR)
	test -f $(RUN_DIR)/probes.init || cp examples/probes.init $(RUN_DIR)/probes.init
	$(BIN) -c examples/galago-run.conf

# apt waits for the dpkg lock (another install on the machine) instead of
# failing at once.
APT := apt-get -o DPkg::Lock::Timeout=600

# $(call apt-ensure,PACKAGES): apt-get install those not installed yet.
apt-ensure = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
		$(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq --no-install-recommends $$missing >/dev/null; fi

test-deps:
	@$(call apt-ensure,$(TEST_DEBS))

# TEST_TMP is the directory a test run keeps its logs and saved inputs in.
# `make test` makes a fresh one and hands it to every tier; a tier run on
# its own (make fuzz, make e2e) makes its own. Runs never share a path.
TEST_TMP ?=
new-test-tmp = $$(if [ -n "$(TEST_TMP)" ]; then mkdir -p "$(TEST_TMP)" && echo "$(TEST_TMP)"; else mktemp -d /tmp/galago-$(1).XXXXXX; fi)

# The tiers of `make test`, in order: Debian packages, generated code,
# lint, unit with privileged (real BPF, real /proc, real containers),
# fuzzing, end-to-end (the real binary with a real Prometheus).
TEST_TIERS := test-deps check-generated lint unit fuzz e2e

# Every tier runs even when an earlier one fails; the run ends with one line
# per tier and the overall result, and fails when any tier failed. Needs root.
test:
	@tmp=$(call new-test-tmp,test); echo "make test: logs and saved inputs under $$tmp"; \
	results=(); failed=0; \
	for tier in $(TEST_TIERS); do \
		echo "==== $$tier"; start=$$SECONDS; \
		if $(MAKE) --no-print-directory $$tier TEST_TMP=$$tmp; then r=PASS; else r=FAIL; failed=1; fi; \
		results+=("$$(printf '%s  %-16s %5ds' $$r $$tier $$((SECONDS - start)))"); \
	done; \
	echo "==== make test summary (logs under $$tmp)"; printf '%s\n' "$${results[@]}"; \
	if [ $$failed -eq 0 ]; then echo "make test: PASS"; else echo "make test: FAIL"; exit 1; fi

# Unit and privileged tiers together. -p 1: the privileged tests of several
# probes share one kernel (global hooks, the cgroup2 root, BPF stats), so
# packages run one after another rather than competing for two cores.
# Then the Helm chart's tests: a module of their own, so that helm's
# dependencies stay out of galago's go.mod.
# Tests that load BPF programs or start servers run one package at a time
# (-p 1: some count the machine's BPF programs). internal/output (its Kafka
# broker outage alone takes 60 s) and the Helm chart's module load no BPF
# and start no shared server, so they run beside them; their log is printed
# at the end.
# GORACE: the race runtime sleeps atexit_sleep_ms (1 s by default) before
# every -race binary exits, test binaries and the helpers they re-execute
# alike (~80 packages, and hundreds of helpers); 50 ms still catches the
# races of goroutines running at the exit (golang/go#61852).
UNIT_SIDE_PKGS := ./internal/output/...
unit: export GORACE := atexit_sleep_ms=50 $(GORACE)
unit:
	@side=$$(mktemp /tmp/galago-unit-side.XXXXXX); \
	( $(GO) test -race -count=1 $(UNIT_SIDE_PKGS) && cd deploy/helm && $(GO) test -count=1 ./... ) > $$side 2>&1 & pid=$$!; \
	GALAGO_PRIVILEGED_TESTS=1 $(GO) test -race -count=1 -p 1 $$($(GO) list $(PKGS) | grep -v '/internal/output\(/\|$$\)'); rc=$$?; \
	wait $$pid; siderc=$$?; echo "--- beside (output, Helm chart):"; cat $$side; rm -f $$side; \
	[ $$rc -eq 0 ] && [ $$siderc -eq 0 ]

# The full -v log goes to $(E2E_LOG), by default e2e.log under the run's
# TEST_TMP; the summary is printed, and the log's tail too when a test fails.
E2E_LOG ?=

e2e: build
	@log="$(E2E_LOG)"; if [ -z "$$log" ]; then log=$(call new-test-tmp,e2e)/e2e.log; fi; \
	echo "e2e: full log in $$log"; \
	GALAGO_PRIVILEGED_TESTS=1 GALAGO_E2E=1 GALAGO_BIN=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -v -timeout 15m ./test/e2e/... > "$$log" 2>&1; rc=$$?; \
	grep -E '^(--- |PASS|FAIL|ok|panic)' "$$log"; \
	if [ $$rc -ne 0 ]; then echo "--- e2e failures, the first line of each message:"; \
		awk '/^=== (RUN|CONT)/ { n = 0 } /^ +[^ ]+_test\.go:[0-9]+: / { buf[n++] = $$0 } \
			/^ *--- FAIL/ { print; for (i = 0; i < n; i++) print buf[i]; n = 0 }' "$$log"; \
		echo "--- e2e log tail ($$log):"; tail -150 "$$log"; fi; \
	exit $$rc

# Runs each fuzz target for FUZZTIME on top of its committed seed corpus;
# a failure is printed with its input, which is moved out of the source
# tree under TEST_TMP (see test/fuzz.sh).
fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) test/fuzz.sh $(call new-test-tmp,fuzz) $(PKGS)

# deb and rpm packages into dist/ (deploy/package/nfpm.yaml), built by
# nfpm run as a Go tool of its own module (tools/go.mod), so its
# dependencies stay out of galago's go.mod. Debian wants a version that
# starts with a digit: 0.0.0~git<describe> until releases are tagged.
PKG_VERSION ?= 0.0.0~git$(subst -,.,$(VERSION))
DIST        ?= dist

package: build
	mkdir -p $(DIST)
	for f in deb rpm; do \
		GOARCH=$$($(GO) env GOARCH) PKG_VERSION='$(PKG_VERSION)' \
			$(GO) tool -modfile=tools/go.mod nfpm package -f deploy/package/nfpm.yaml -p $$f -t $(DIST)/ || exit 1; \
	done

# The container image as a tarball (dist/galago-image.tar) for ctr/docker/
# podman load, built without a daemon by tools/galago-image
# (go-containerregistry): a static binary on an empty base.
IMAGE_TAG ?= galago:$(subst +,-,$(subst ~,-,$(PKG_VERSION)))

image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/galago-static ./cmd/galago
	mkdir -p $(DIST)
	cd tools && $(GO) run ./galago-image -bin $(CURDIR)/bin/galago-static -conf $(CURDIR)/deploy/package/gala-gopher.conf \
		-tag '$(IMAGE_TAG)' -version '$(VERSION)' -o $(abspath $(DIST))/galago-image.tar

GOLANGCI := $(shell $(GO) env GOPATH)/bin/golangci-lint
GOLANGCI_VERSION := v2.15.0

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)
	@test -x $(GOLANGCI) || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	$(GOLANGCI) run $(PKGS)

# make bench: the application-overhead, agent-cost and accuracy run of
# cmd/galago-bench (no agent vs galago's probe sets, interleaved, on real
# servers), which regenerates BENCHMARKS.md's measured section and writes
# bench/results/<date>-<commit>.json. Needs root. BENCH_FLAGS passes flags,
# e.g. BENCH_FLAGS='-quick -workload nginx-close -probes tcp+socket';
# PEER_AGENT_CMD adds a peer agent (BENCHMARKS.md says how).
BENCH_DEBS := nginx wrk redis-server redis-tools postgresql memcached libmemcached-tools
BENCH_FLAGS ?=

bench: build
	@$(call apt-ensure,$(BENCH_DEBS))
	$(GO) run ./cmd/galago-bench -galago $(BIN) -commit $(VERSION) $(BENCH_FLAGS)

# Micro-benchmarks of the hot paths (decode, aggregation, /metrics
# rendering) with allocations; no root needed (privileged benchmarks skip).
bench-micro:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/...

clean:
	rm -rf bin

include Makefile.bpf
