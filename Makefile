# Stockroom: the two commands of README.md, and the benchmark.
#   make serve   installs what is missing, builds, runs the server on the sample catalogue
#   make test    installs what is missing, builds, runs every test (on SQLite and on a throwaway
#                PostgreSQL cluster, .ci/postgres, with a throwaway S3 store, .ci/s3), checks the API contract (openapi.yaml) with
#                openapi-core and schemathesis, and runs each fuzz target for 10 s
#                and drives the web console in headless Chromium (.ci/console-browser), and runs
#                make bench's short version (.ci/bench-quick: every section completes); first it
#                checks the package graph and that the tree is formatted (.ci/format-lint)
#   make format  formats the tree as `swift format` writes it (.swift-format; generated files left)
#   make console-shots  builds, serves demo data, saves a PNG of each console page in
#                .build/console-shots/ and copies the dashboard's to docs/console-dashboard.png
#   make fuzz    each libFuzzer target for FUZZ_SECONDS (60 by default)
#   make bench   release build, then catalogue and streaming figures (wrk, nginx for comparison)

SWIFT ?= swift
ARGS ?=

.PHONY: deps build serve test format console-shots fuzz bench clean

deps:
	@.ci/install-deps

build: deps
	$(SWIFT) build

format:
	.ci/format-lint fix

serve: build
	.build/debug/stockroom serve --upstream simulator $(ARGS)

test: deps
	@.ci/install-deps --tests
	.ci/graph-check
	.ci/format-lint
	.ci/contract spec
	rm -f .build/contract-exchanges.jsonl
	$(SWIFT) build --product stockroom
	STOCKROOM_CONTRACT_LOG=$(CURDIR)/.build/contract-exchanges.jsonl SWIFT=$(SWIFT) .ci/postgres run .ci/s3 run .ci/swift-test
	.ci/contract responses .build/contract-exchanges.jsonl
	.ci/contract fuzz .build/debug/stockroom
	.ci/console-browser test .build/debug/stockroom
	.ci/cli-tests .build/debug/stockroom
	.ci/client-tests .build/debug/stockroom
	.ci/client-hostile .build/debug/stockroom
	.ci/crash-test .build/debug/stockroom
	$(SWIFT) build --product StockroomBench
	$(SWIFT) build --product StockroomKitBench
	.ci/bench-quick
	SWIFT=$(SWIFT) FUZZ_SECONDS=10 .ci/fuzz

console-shots: deps
	@.ci/install-deps --tests
	$(SWIFT) build --product stockroom
	rm -rf .build/console-shots
	.ci/console-browser shots .build/debug/stockroom .build/console-shots
	mkdir -p docs
	cp .build/console-shots/console-dashboard.png docs/console-dashboard.png

fuzz: deps
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60) .ci/fuzz

bench:
	@.ci/install-deps --bench
	.ci/bench

clean:
	rm -rf .build
