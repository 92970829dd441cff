# symdex — common tasks. `make test` sets up what it needs (scripts/setup.sh) and runs everything.
SHARED ?= $(abspath ../shared)
CARGO ?= cargo
RUN_STORE ?= ./symbols

.PHONY: all build release setup lint tf-check edge-test test test-build docs conformance bench fuzz hunt run lambda deploy clean

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

# Terraform fmt and validate, offline (says clearly when terraform or the provider is missing).
tf-check:
	bash scripts/terraform-check.sh

# The CloudFront Functions (infra/modules/symdex/edge/*.js) under node's test runner.
edge-test:
	node --test infra/modules/symdex/edge/*.test.mjs

# Every test: unit tests next to the code, end-to-end tests in tests/ and functions/*/tests/
# (moto_server, real debuggers, the Terraform module applied to moto), the edge functions.
# cargo-nextest runs the tests of every suite side by side, each in a process of its own
# (.config/nextest.toml): `cargo test` ran the suites one after another, each ending on its
# slowest test with a core idle, and took a third longer.
# The tests make and delete tens of thousands of small files (stores, fixtures, archives): they
# run in a directory on /dev/shm where it is a tmpfs with 2 GiB free (a container's 64 MiB
# default is too small: the suite peaks near 70 MB), about half the time of a disk (ext4
# spends it allocating inodes near recently freed ones), and removed after. TEST_TMPDIR=DIR
# picks another place.
test: setup lint tf-check edge-test
	@tmp="$${TEST_TMPDIR:-}"; \
	if [ -z "$$tmp" ] && [ "$$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ] && \
	   [ "$$(df --output=avail -k /dev/shm | tail -n 1)" -ge 2097152 ]; then \
	  tmp=$$(mktemp -d /dev/shm/symdex-test.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; trap 'exit 130' INT TERM; fi; \
	if [ -n "$$tmp" ]; then echo "make test: temporary files under $$tmp"; export TMPDIR="$$tmp"; fi; \
	if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  $(CARGO) nextest run --workspace && $(CARGO) test --workspace --doc; \
	else \
	  echo "make test: cargo-nextest is missing: the suites run one after another (slower)"; \
	  $(CARGO) test --workspace; \
	fi

# What `make test` builds, built (CI starts it while setup installs: .ci/run).
test-build:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace --no-run

# docs/cli.md anew from every command's --help (tests/cli_docs.rs fails when it is stale).
docs:
	SYMDEX_BLESS=1 $(CARGO) test --test cli_docs

# Extra run over the reference corpus and fixtures in ../shared (not needed for `make test`).
# The test profile `make test` built, with the workspace's features (`--workspace`: the root
# package's alone would build the shared crate again, a minute and a half of CI): the run
# takes seconds, a release build minutes.
conformance:
	SYMDEX_SHARED=$(SHARED) $(CARGO) test --workspace --test conformance -- --ignored --nocapture

# Throughput figures (files/s), symdex beside Sentry's symbolic on the same files.
bench: setup release
	bash scripts/bench.sh $(SHARED)

# Coverage-guided fuzzing (fuzz/, cargo-fuzz) for FUZZ_SECONDS per target, when a nightly
# toolchain is present; says so when it is not.
fuzz:
	bash scripts/fuzz.sh

# Races CI's fixed schedules miss: the interleaving and death tests over new schedules from a
# random seed base, printed so that a failure replays (scripts/hunt.sh; HUNT_SCHEDULES,
# HUNT_S3_SCHEDULES).
hunt: setup
	bash scripts/hunt.sh

# The main job on the embedded default: index symdex's own release binary (split into binary +
# debug file) and the system libraries it links against into ./symbols, show what was published.
run:
	bash scripts/run.sh

# Deployable bootstrap zips for the Lambda functions (x86_64 here; see docs/lambda.md for arm64).
lambda:
	bash scripts/lambda.sh

# Deploy to real AWS (credentials from the environment): builds the zips, then applies
# infra/examples/complete. NAME must be globally unique (bucket names); ARCH defaults to the
# machine's (x86_64 here) because `make lambda` builds natively.
NAME ?= symdex
ARCH ?= x86_64
deploy: lambda
	cd infra/examples/complete && terraform init -input=false && \
	  terraform apply -var name=$(NAME) -var architecture=$(ARCH)

clean:
	$(CARGO) clean
