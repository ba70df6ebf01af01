# nsbox — build, run and test. `make run` and `make test` are the two
# commands a newcomer needs (README.md); both install what they need.

GO      ?= go
BIN     := bin/nsbox
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GOFILES := $(shell find . -name '*.go' -not -path './bin/*') go.mod go.sum $(wildcard policies/*.toml)

.PHONY: all build run test deps vet fmt-check unit-test fuzz clean

all: build

deps:
	@scripts/install-deps.sh

build: $(BIN)

# Static: the init is re-executed for every run and starts fastest without
# a dynamic loader, and the binary runs on hosts without libseccomp. cgo is
# needed for libseccomp-golang, so glibc and Debian's libseccomp.a are
# linked in statically (nsbox uses no NSS lookups: netgo/osusergo keep Go
# from linking glibc's resolver and getpwnam).
$(BIN): $(GOFILES)
	@mkdir -p bin
	CGO_ENABLED=1 $(GO) build -trimpath -tags netgo,osusergo \
		-ldflags "-s -w -X main.version=$(VERSION) -linkmode external -extldflags -static" -o $@ ./cmd/nsbox

# The main job: examples/hello.py under the built-in default policy.
run: deps build
	$(BIN) run --policy default examples/hello.py

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Every test, as root, with real namespaces. NSBOX_MUST_WORK=1 turns every
# "this host cannot" skip into a failure (CI sets it).
test: deps build fmt-check vet
	NSBOX_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 ./...

fuzz:
	$(GO) test ./policies/ -run '^$$' -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./sandbox/spec/ -run '^$$' -fuzz FuzzDecode -fuzztime 30s

clean:
	rm -rf bin
