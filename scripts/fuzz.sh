#!/usr/bin/env bash
# `make fuzz`: runs every cargo-fuzz target in fuzz/ for FUZZ_SECONDS each (default 60), from
# seeds written by the tests' builders. Needs a nightly toolchain and cargo-fuzz; says so and
# stops (successfully) when they are missing. A crash is kept by cargo-fuzz under
# fuzz/artifacts/<target>/: turn it into a regression test next to the code it broke.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${FUZZ_SECONDS:-60}
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "make fuzz: no nightly toolchain here (rustup toolchain install nightly); nothing fuzzed."
  echo "make fuzz: the stable property tests (make test) still cover every format and layout."
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "make fuzz: cargo-fuzz is missing (cargo install cargo-fuzz); nothing fuzzed."
  exit 0
fi
seeds="$root/fuzz/corpus/identify"
SYMDEX_FUZZ_SEEDS="$seeds" cargo test -q -p symdex-shared --features testing --lib \
  write_fuzz_seeds -- --ignored >/dev/null
for target in identify keys events archive; do
  mkdir -p "$root/fuzz/corpus/$target"
  echo "make fuzz: $target for ${seconds}s"
  (cd "$root/fuzz" && cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048)
done
