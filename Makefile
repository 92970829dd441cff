# symdex — common tasks. `make test` sets up what it needs (scripts/setup.sh) and runs everything.
SHARED ?= $(abspath ../shared)
CARGO ?= cargo
RUN_STORE ?= ./symbols

.PHONY: all build release setup lint test conformance bench run lambda clean

all: build

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release --workspace

setup:
	bash scripts/setup.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Every test: unit tests next to the code, end-to-end tests in tests/.
test: setup lint
	$(CARGO) test --workspace

# Extra run over the reference corpus and fixtures in ../shared (not needed for `make test`).
conformance:
	SYMDEX_SHARED=$(SHARED) $(CARGO) test --release --test conformance -- --ignored --nocapture

# Throughput figures (files/s), symdex beside Sentry's symbolic on the same files.
bench: release
	bash scripts/bench.sh $(SHARED)

# The main job on the embedded default: index symdex's own release binary (split into binary +
# debug file) and the system libraries it links against into ./symbols, show what was published.
run:
	bash scripts/run.sh

# Deployable bootstrap zips for the Lambda functions (x86_64 here; see README for arm64).
lambda:
	bash scripts/lambda.sh

clean:
	$(CARGO) clean
