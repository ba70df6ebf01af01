# nsbox — build, run and test. `make run` and `make test` are the two
# commands a newcomer needs (README.md); both install what they need.
# docs/development.md describes every target.

GO      ?= go
BIN     := bin/nsbox
INIT    := bin/nsbox-init
SERVE   := bin/nsbox-serve
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# netgo, osusergo: no NSS lookups through glibc in a static binary;
# sqlite_omit_load_extension: the audit log's SQLite never dlopens;
# urfave_cli_no_docs: drops urfave/cli's man/markdown generation (unused;
# docs/cli.md has its own generator) and with it blackfriday, whose package
# initialisers every start-up would pay for.
TAGS    := netgo,osusergo,sqlite_omit_load_extension,urfave_cli_no_docs
# Everything compiled or embedded into the binary (go:embed: the policies,
# the seccomp profiles, the Python runner, the API document), and this file for TAGS.
GOFILES := $(shell find . -name '*.go' -not -path './bin/*') go.mod go.sum Makefile \
	$(wildcard policies/*.toml) $(wildcard seccomp-profiles/*.json) $(wildcard seccomp-profiles/*.bpf) sandbox/pyrunner/runner.py \
	docs/api/openapi.json

.PHONY: all build run test deps vet fmt-check unit-test fuzz clean datasci datasci-min web

all: build

deps:
	@scripts/install-deps.sh

build: $(BIN) $(INIT) $(SERVE)

# Static: the init is re-executed for every run and starts fastest without
# a dynamic loader, and the binary runs on hosts without libseccomp. cgo is
# needed for libseccomp-golang, so glibc and Debian's libseccomp.a are
# linked in statically (see TAGS).
$(BIN): $(GOFILES)
	@mkdir -p bin
	CGO_ENABLED=1 $(GO) build -trimpath -tags $(TAGS) \
		-ldflags "-s -w -X main.version=$(VERSION) -linkmode external -extldflags -static" -o $@ ./cmd/nsbox

# The sandbox init alone (cmd/nsbox-init), started once per run inside the
# new namespaces: without cgo it starts faster than nsbox (docs/benchmarks.md).
# nsbox uses it when it lies beside the nsbox binary, else re-executes itself.
$(INIT): $(GOFILES)
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -tags netgo,osusergo -ldflags "-s -w" -o $@ ./cmd/nsbox-init

# The service (cmd/nsbox-serve): `nsbox serve` and `nsbox run --server`
# execute it from beside nsbox. Its own binary keeps net/http out of nsbox,
# whose every cold run would load it. Built as nsbox is (cgo: it runs
# sandboxes and writes the audit log).
$(SERVE): $(GOFILES)
	@mkdir -p bin
	CGO_ENABLED=1 $(GO) build -trimpath -tags $(TAGS) \
		-ldflags "-s -w -X main.version=$(VERSION) -linkmode external -extldflags -static" -o $@ ./cmd/nsbox-serve

# The main job: examples/hello.py under the built-in default policy.
run: deps build
	$(BIN) run --policy default examples/hello.py

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet -tags $(TAGS) ./...

# The built-in roots live here (sandbox/roots); base is built by nsbox on
# first use, datasci, datasci-min and web by `make datasci`, `make
# datasci-min` and `make web`.
ROOTS ?= $(or $(NSBOX_ROOTS_DIR),/var/lib/nsbox/roots)

# The datasci root: numpy, pandas, matplotlib, seaborn, scipy, statsmodels,
# scikit-learn, openpyxl and pyarrow from policies/datasci.lock; the leaner
# datasci-min root: numpy, pandas and matplotlib (policies/datasci-min.lock);
# the web root: requests, httpx and certifi from policies/web.lock (wheels
# from PyPI, hash-checked; pip's cache is reused). Each is rebuilt only when
# its lock differs from the one the root was built with, or the root lacks
# this nsbox's compiled Python runner.
datasci datasci-min web: build
	@if cmp -s policies/$@.lock $(ROOTS)/$@/.nsbox/lock.txt && \
		test -e $(ROOTS)/$@$$($(BIN) rootfs runner-path); then \
		echo "$@ root in $(ROOTS)/$@ is up to date"; \
	else \
		$(BIN) rootfs build --python /usr/bin/python3.11 --lock policies/$@.lock --out $(ROOTS)/$@; \
	fi

# Every test, as root, with real namespaces. NSBOX_MUST_WORK=1 turns every
# "this host cannot" skip into a failure (CI sets it). The datasci root is
# built first: the tests run a pandas and matplotlib program on it; so are
# the datasci-min root, whose policy a test runs, and the web root, whose
# requests and httpx the network tests use.
test: deps build datasci datasci-min web mcp-venv tools-venv fmt-check vet
	@$(MAKE) --no-print-directory k8s-validate apparmor-check
	NSBOX_BIN=$(CURDIR)/$(BIN) NSBOX_MCP_PYTHON=$(CURDIR)/$(MCP_VENV)/bin/python NSBOX_UV=$(CURDIR)/$(TOOLS_VENV)/bin/uv $(GO) test -tags $(TAGS) -race -count=1 -timeout 20m ./...
	@$(MAKE) --no-print-directory python-test
	@$(MAKE) --no-print-directory python-adapters-test

# Every fuzz target (each `func Fuzz...` in a _test.go file), 500000
# inputs each (FUZZTIME=...). A count, not a duration: with a
# duration, Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" at the deadline (golang/go#75804, fixed in
# Go 1.27). -fuzzminimizetime bounds the minimizing of each new interesting
# input: at the default 60 s a single one stalls the whole run.
fuzz:
	@grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sort | \
	while IFS=: read -r file fn; do \
		pkg=$$(dirname "$$file"); name=$${fn#func }; \
		echo "== $$pkg $$name ($(or $(FUZZTIME),500000x))"; \
		$(GO) test "$$pkg/" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(or $(FUZZTIME),500000x) \
			-fuzzminimizetime 100x || exit 1; \
	done

clean:
	rm -rf bin

# Every generated file, from its one source: the built-in seccomp profiles
# compiled to BPF for this machine's architecture (seccomp-profiles), the
# Python runner bundled from its modules (sandbox/pyrunner), the CLI
# reference (docs/cli.md) and the policy reference (docs/policies.md).
# Each is checked in, and a test fails when one is stale; run this after
# changing a source (for the seccomp BPF also after a libseccomp update)
# and commit the result.
.PHONY: generate
generate:
	$(GO) generate ./...

# --- datasci venv and pandas benchmark -----------------------------------------
# Targets: datasci-venv, bench-pandas.
#   datasci-venv  bench/.venv-datasci: a venv of $(DATASCI_PYTHON) with exactly
#                 policies/datasci.lock installed (hash-checked, wheels only,
#                 no deps resolved), reusing pip's cache; redone when the lock
#                 changes. The no-sandbox side of the benchmark.
#   bench-pandas  `import pandas` under `nsbox run --policy datasci` versus
#                 that venv's python outside any sandbox, interleaved; medians,
#                 p95 and the A/B ratio to stdout and bench/results/
#                 (bench/README.md). Needs the datasci root built first.
# The lock is regenerated by scripts/lock-root.sh datasci, never by make.

DATASCI_LOCK   := policies/datasci.lock
DATASCI_VENV   ?= bench/.venv-datasci
DATASCI_PYTHON ?= /usr/bin/python3.11
DATASCI_PIP    ?= python3 -m pip
BENCH_PYTHON   ?= python3
BENCH_ARGS     ?=

.PHONY: datasci-venv bench-pandas

datasci-venv: $(DATASCI_VENV)/.complete

# Built in place (a venv is not relocatable); the stamp is written last, so
# an interrupted build is redone from scratch.
$(DATASCI_VENV)/.complete: $(DATASCI_LOCK)
	rm -rf $(DATASCI_VENV)
	$(DATASCI_PYTHON) -m venv --without-pip $(DATASCI_VENV)
	$(DATASCI_PIP) --python $(DATASCI_VENV)/bin/python install --disable-pip-version-check --quiet \
		--require-hashes --only-binary=:all: --no-deps -r $(DATASCI_LOCK)
	$(DATASCI_PIP) --python $(DATASCI_VENV)/bin/python check
	touch $@

bench-pandas: build datasci-venv
	NSBOX_BIN=$(CURDIR)/$(BIN) DATASCI_VENV=$(CURDIR)/$(DATASCI_VENV) \
		$(BENCH_PYTHON) bench/pandas_import.py $(BENCH_ARGS)

# Every fuzz target (each `func Fuzz...` in a _test.go file) for 50000
# inputs each, for CI; `make fuzz` runs 500000 each. Crashers are written
# under the package's testdata/fuzz/ and then fail `go test` until fixed.
.PHONY: fuzz-short
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=50000x

# --- stress suite ---------------------------------------------------------------
# Target: stress. TestStress at full size: 500 sequential runs, 200
# concurrent (8 at a time) and 50 whose supervisor is SIGKILLed at a random
# moment, a mix of ok, error, timeout, memory bomb, output flood, fork bomb,
# daemonizer, abort and orphan; beside them 50 rounds of the faults
# (tests/stress_faults_test.go: callers that close nsbox's stdout or
# stderr or send SIGQUIT, stdout on /dev/full, programs too big, FIFOs,
# devices and endless stdin, a big-cap flood of both streams, idmapped and
# refused workspaces, device audit logs, signals to the sandbox's PID 1,
# bad labels, repeated flags, unknown policy keys, `ulimit -n 20`), 3
# rootfs builds SIGKILLed and redone under runs that hold the root, and
# one run against a locked audit log. Then: timeouts killed within their
# bound, no leaked process, cgroup, mount, run directory or file in /dev,
# a bounded supervisor, killed supervisors' rows finished by the next run
# or audit command, and one true row per run. Plain `make test` runs the
# short form (tests/stress_test.go has its defaults). As root.
STRESS_SEQ    ?= 500
STRESS_CONC   ?= 200
STRESS_PAR    ?= 8
STRESS_KILLS  ?= 50
STRESS_FAULTS ?= 50
STRESS_BUILDS ?= 3

.PHONY: stress

stress: build
	cd tests && NSBOX_BIN=$(CURDIR)/$(BIN) NSBOX_STRESS_SEQ=$(STRESS_SEQ) NSBOX_STRESS_CONC=$(STRESS_CONC) \
		NSBOX_STRESS_PAR=$(STRESS_PAR) NSBOX_STRESS_KILLS=$(STRESS_KILLS) \
		NSBOX_STRESS_FAULTS=$(STRESS_FAULTS) NSBOX_STRESS_BUILDS=$(STRESS_BUILDS) \
		$(GO) test -tags $(TAGS) -count=1 -v -run '^TestStress$$' -timeout 30m .

# --- cold-start benchmark ------------------------------------------------------
#   bench  every method (bare python, nsbox per policy and with each layer
#          switched off, bubblewrap, runc; workloads pass, stdlib, pandas)
#          interleaved run by run with bare python, plus sizes, phases and
#          root checks; writes docs/benchmarks.md, the only page with measured
#          figures, and bench/results/bench.json (bench/README.md). As root;
#          installs bubblewrap and runc with apt-get when missing, and builds
#          the datasci root and venv the pandas rows compare. Not part of
#          `test`.
.PHONY: bench
bench: build datasci datasci-venv
	NSBOX_BIN=$(CURDIR)/$(BIN) DATASCI_VENV=$(CURDIR)/$(DATASCI_VENV) \
		$(BENCH_PYTHON) bench/bench.py $(BENCH_ARGS)

# --- MCP client venv -------------------------------------------------------------
# Target: mcp-venv. tests/.venv-mcp: a venv with the official MCP Python
# client pinned by tests/mcp/requirements.txt (wheels only, no deps resolved,
# pip's cache reused), which the MCP tests (tests/mcp_test.go) drive
# `nsbox mcp` with; redone when the file changes. `make test` builds it.
MCP_VENV := tests/.venv-mcp

.PHONY: mcp-venv
mcp-venv: $(MCP_VENV)/.complete

$(MCP_VENV)/.complete: tests/mcp/requirements.txt
	rm -rf $(MCP_VENV)
	python3 -m venv --without-pip $(MCP_VENV)
	python3 -m pip --python $(MCP_VENV)/bin/python install --disable-pip-version-check --quiet \
		--only-binary=:all: --no-deps -r tests/mcp/requirements.txt
	python3 -m pip --python $(MCP_VENV)/bin/python check
	touch $@
# --- tools venv ----------------------------------------------------------------
# Target: tools-venv. .venv-tools: uv, the resolver `nsbox rootfs lock`
# runs (a maintained resolver rather than one of nsbox's own), pinned with
# its hash in scripts/tools.lock (wheels only, no deps resolved, pip's cache
# reused); redone when the lock changes. bin/nsbox finds .venv-tools/bin/uv
# when no uv is on PATH; `make test` builds it for the lock tests.
TOOLS_VENV := .venv-tools

.PHONY: tools-venv
tools-venv: $(TOOLS_VENV)/.complete

$(TOOLS_VENV)/.complete: scripts/tools.lock
	rm -rf $(TOOLS_VENV)
	python3 -m venv --without-pip $(TOOLS_VENV)
	python3 -m pip --python $(TOOLS_VENV)/bin/python install --disable-pip-version-check --quiet \
		--require-hashes --only-binary=:all: --no-deps -r scripts/tools.lock
	$(TOOLS_VENV)/bin/uv --version
	touch $@
# --- Python SDK and wheel --------------------------------------------------------
# Targets: wheel, python-test (docs/python.md).
#   wheel        dist/nsbox-VERSION-py3-none-manylinux_2_17_x86_64....whl: the
#                SDK (python/nsbox) with bin/nsbox, nsbox-init and nsbox-serve
#                as its scripts, versioned as bin/nsbox is; built by
#                hatchling in $(SDK_BUILD_VENV) (python/build.lock, hash-checked,
#                redone when the lock changes).
#   python-test  installs that wheel into a fresh venv and runs python/tests
#                (stdlib unittest) against real sandboxes: the CLI, nsbox.run by
#                subprocess and through a service, datasci sessions. `test` runs
#                it after the Go tests, never beside them: both start sandboxes.
#   bench-sdk    bench/sdk_latency.py: the wheel's size, a fresh venv's install
#                to first result, and nsbox.run's latency by subprocess and
#                through a service beside bare python3 (stdout and
#                bench/results/sdk.json). As root; not part of `test`.
SDK_PYTHON     ?= /usr/bin/python3.11
SDK_BUILD_VENV := python/.venv-build

.PHONY: wheel python-test bench-sdk

$(SDK_BUILD_VENV)/.complete: python/build.lock
	rm -rf $(SDK_BUILD_VENV)
	$(SDK_PYTHON) -m venv --without-pip $(SDK_BUILD_VENV)
	python3 -m pip --python $(SDK_BUILD_VENV)/bin/python install --disable-pip-version-check --quiet \
		--require-hashes --only-binary=:all: --no-deps -r python/build.lock
	touch $@

wheel: build $(SDK_BUILD_VENV)/.complete
	rm -f dist/nsbox-*.whl
	$(SDK_BUILD_VENV)/bin/python -m build --wheel --no-isolation --outdir dist python

python-test: wheel datasci
	NSBOX_SDK_PYTHON=$(SDK_PYTHON) $(SDK_PYTHON) -m unittest discover -s python/tests -t python -v

bench-sdk: wheel
	NSBOX_SDK_PYTHON=$(SDK_PYTHON) $(BENCH_PYTHON) bench/sdk_latency.py $(BENCH_ARGS)
# --- Python adapters' tests ----------------------------------------------------
# Target: python-adapters-test. The adapters (nsbox.tools, nsbox.integrations:
# LangChain, smolagents) tested against the real frameworks, pinned with
# hashes in python/tests/requirements-adapters.lock and installed into
# python/.venv-adapters (wheels only, no deps resolved; redone when the lock
# changes; pip's cache is reused). The tests (stdlib unittest; they skip
# themselves without NSBOX_ADAPTERS_TEST=1, as in the SDK's own discovery)
# run real sandboxes through the SDK from python/ (its private service, as
# root) and the datasci root.
# The lock is regenerated by python/tests/lock-adapters.sh, never by make.
ADAPTERS_LOCK   := python/tests/requirements-adapters.lock
ADAPTERS_VENV   ?= python/.venv-adapters
ADAPTERS_PYTHON ?= /usr/bin/python3.11
ADAPTERS_PIP    ?= python3 -m pip
# Where the nsbox package the tests import lives (the repository's own).
ADAPTERS_PYTHONPATH ?= $(CURDIR)/python
ADAPTERS_TESTS  := tests.test_tools tests.test_langchain tests.test_smolagents

.PHONY: python-adapters-test

$(ADAPTERS_VENV)/.complete: $(ADAPTERS_LOCK)
	rm -rf $(ADAPTERS_VENV)
	$(ADAPTERS_PYTHON) -m venv --without-pip $(ADAPTERS_VENV)
	$(ADAPTERS_PIP) --python $(ADAPTERS_VENV)/bin/python install --disable-pip-version-check --quiet \
		--require-hashes --only-binary=:all: --no-deps -r $(ADAPTERS_LOCK)
	$(ADAPTERS_PIP) --python $(ADAPTERS_VENV)/bin/python check
	touch $@

python-adapters-test: build datasci $(ADAPTERS_VENV)/.complete
	cd python && NSBOX_ADAPTERS_TEST=1 NSBOX_BIN=$(CURDIR)/$(BIN) PYTHONPATH=$(ADAPTERS_PYTHONPATH) \
		PYTHONDONTWRITEBYTECODE=1 $(CURDIR)/$(ADAPTERS_VENV)/bin/python -m unittest -v $(ADAPTERS_TESTS)
# --- cgroup v2 ------------------------------------------------------------------
# Target: test-v2. The tests that depend on cgroups and on the kernel, as
# root with NSBOX_MUST_WORK=1, in a guest whose only hierarchy is cgroup
# v2: Debian's kernel booted by virtme-ng under QEMU (KVM where a probe
# boot works, else emulation), the host's filesystem shared read-only.
# Installs QEMU, the kernel and busybox-static with apt-get and virtme-ng
# into .test-v2/venv; builds the roots here. scripts/test-v2/run.sh has
# the selection and why; docs/development.md the rest.
.PHONY: test-v2
test-v2: deps build datasci
	ROOTS=$(ROOTS) GO=$(GO) TAGS=$(TAGS) scripts/test-v2/run.sh
# --- deployment files --------------------------------------------------------
# Targets: k8s-validate, apparmor-check (docs/kubernetes.md); `test` runs both.
#   k8s-validate    every manifest under deploy/kubernetes against the
#                   Kubernetes schemas that kubernetes-validate bundles, in
#                   strict mode (an unknown field is refused), for the oldest
#                   and newest releases the page names; the service's
#                   settings and the policies in the ConfigMap against nsbox
#                   itself; then each fixture of deploy/check/refused, which
#                   must be refused; and the pods' entrypoint run as in a
#                   privileged pod on a cgroup v2 node
#                   (deploy/check/entrypoint-check.sh, as root, in a mount
#                   namespace of its own). No cluster. The validator lives in
#                   $(K8S_VENV) (deploy/check/requirements.lock, hash-checked,
#                   wheels only; redone when the lock changes).
#   apparmor-check  deploy/apparmor/nsbox compiled by an AppArmor 4 parser
#                   and loaded nowhere, and refused with its rule misspelt
#                   (deploy/check/apparmor.sh; fetches Debian's parser with
#                   apt into deploy/.apparmor when the host has none).
K8S_VENV   := deploy/.venv-k8s
K8S_PYTHON ?= /usr/bin/python3.11

.PHONY: k8s-validate apparmor-check

$(K8S_VENV)/.complete: deploy/check/requirements.lock
	rm -rf $(K8S_VENV)
	$(K8S_PYTHON) -m venv --without-pip $(K8S_VENV)
	python3 -m pip --python $(K8S_VENV)/bin/python install --disable-pip-version-check --quiet \
		--require-hashes --only-binary=:all: --no-deps -r deploy/check/requirements.lock
	python3 -m pip --python $(K8S_VENV)/bin/python check
	touch $@

k8s-validate: build $(K8S_VENV)/.complete
	NSBOX_BIN=$(CURDIR)/$(BIN) $(K8S_VENV)/bin/python deploy/check/k8s_validate.py \
		--fixtures deploy/check/refused deploy/kubernetes
	deploy/check/entrypoint-check.sh

apparmor-check:
	deploy/check/apparmor.sh

# Target: pin-runnerlibs. Re-vendor and re-pin the runner's RestrictedPython
# wheel (sandbox/pyrunner/runnerlibs): make pin-runnerlibs VERSION=9.0.
# Never run by make test; roots check the vendored wheel against its lock.
.PHONY: pin-runnerlibs
pin-runnerlibs:
	scripts/pin-runnerlibs.sh $(VERSION)
