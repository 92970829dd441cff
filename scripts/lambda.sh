#!/usr/bin/env bash
# `make lambda`: deployable bootstrap zips for the indexer, remover and sweeper functions
# (provided.al2023, x86_64 on this machine). Each binary carries a GNU build id
# (.cargo/config.toml), so symdex can index its own functions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=target/lambda
cargo build --release --quiet -p symdex-indexer -p symdex-remover -p symdex-sweeper
for fn in indexer remover sweeper; do
  dir="$out/$fn"
  rm -rf "$dir" && mkdir -p "$dir"
  # Ship a stripped bootstrap; keep its debug file beside it (index both with symdex).
  objcopy --only-keep-debug "target/release/symdex-$fn" "$dir/bootstrap.debug"
  objcopy --strip-debug --add-gnu-debuglink="$dir/bootstrap.debug" "target/release/symdex-$fn" "$dir/bootstrap"
  if ! readelf -n "$dir/bootstrap" | grep -q "Build ID"; then
    echo "lambda: $fn has no GNU build id" >&2
    exit 1
  fi
  (cd "$dir" && rm -f "../symdex-$fn.zip" && zip -q -j "../symdex-$fn.zip" bootstrap)
  glibc=$(objdump -T "$dir/bootstrap" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "lambda: $out/symdex-$fn.zip ($(du -h "$out/symdex-$fn.zip" | cut -f1), x86_64, needs $glibc; build id $(readelf -n "$dir/bootstrap" | awk '/Build ID/{print $3}'))"
done
