#!/usr/bin/env bash
# `make bench`: symdex keys throughput (files/s, MB/s) over ten times the corpus, beside Sentry's
# symbolic (PyPI) reading the same files in the same run (bench_identify.sh), then the indexer,
# scale, serve and push parts. Prints figures; asserts nothing.
set -euo pipefail
shared=${1:-../shared}
corpus="$shared/corpus/files"
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.work/bench-venv"
if [ ! -d "$corpus" ]; then
  echo "bench: no corpus at $corpus; building a small one"
  corpus="$root/.work/bench-corpus"
  mkdir -p "$corpus"
  cp "$root/target/release/symdex" "$corpus/" 2>/dev/null || true
  for f in /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6; do
    [ -e "$f" ] && cp -L "$f" "$corpus/"
  done
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'symbolic==13.9.0'
fi
bash "$root/scripts/bench_identify.sh" "$corpus" "$venv/bin/python"

# Indexer part: the Lambda handler over a local S3 endpoint, beside a naive whole download.
echo
cargo run --release --quiet -p symdex-lambda --example bench_indexer -- "$corpus" "${BENCH_OBJECTS:-300}"

# Scale part: index / re-index / verify of 1,000 to 20,000 files beside debuginfod -F.
echo
bash "$root/scripts/bench_scale.sh"

# Serve part: `symdex serve` beside nginx on the same store.
echo
bash "$root/scripts/bench_compress.sh" "$corpus"
bash "$root/scripts/bench_serve.sh" "$corpus"
bash "$root/scripts/bench_upstream.sh" "$corpus"

# Push part: symdex push beside aws s3 cp to the same endpoint.
echo
bash "$root/scripts/bench_push.sh"
