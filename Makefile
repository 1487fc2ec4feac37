# Stockroom: the two commands of README.md, and the benchmark.
#   make serve   installs what is missing, builds, runs the server on the sample catalogue
#   make test    installs what is missing, builds, runs every test
#   make bench   release build, then catalogue and streaming figures (wrk, nginx for comparison)

SWIFT ?= swift
ARGS ?=

.PHONY: deps build serve test bench clean

deps:
	@.ci/install-deps

build: deps
	$(SWIFT) build

serve: build
	.build/debug/stockroom serve --upstream simulator $(ARGS)

test: deps
	.ci/graph-check
	$(SWIFT) test
	$(SWIFT) build --product stockroom
	.ci/cli-tests .build/debug/stockroom
	.ci/crash-test .build/debug/stockroom

bench:
	@.ci/install-deps --bench
	.ci/bench

clean:
	rm -rf .build
