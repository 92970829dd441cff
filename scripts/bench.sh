#!/usr/bin/env bash
# `make bench`: symdex keys throughput (files/s) over the corpus, beside Sentry's symbolic
# (PyPI) reading the same files in the same run. Prints figures; asserts nothing.
set -euo pipefail
shared=${1:-../shared}
corpus="$shared/corpus/files"
rounds=${BENCH_ROUNDS:-30}
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
files=$(find "$corpus" -type f | wc -l)
bytes=$(du -sb "$corpus" | cut -f1)
echo "bench: $files files ($bytes bytes) in $corpus, $rounds rounds each"

start=$(date +%s.%N)
for _ in $(seq "$rounds"); do
  "$root/target/release/symdex" keys --json "$corpus" >/dev/null
done
end=$(date +%s.%N)
read_bytes=$("$root/target/release/symdex" keys --json "$corpus" | python3 -c '
import json, sys
print(sum(json.loads(l).get("bytes_read", 0) for l in sys.stdin))')
python3 - "$start" "$end" "$files" "$rounds" "$read_bytes" "$bytes" <<'PY'
import sys
start, end, files, rounds, read, size = map(float, sys.argv[1:])
secs = end - start
print(f"symdex keys : {files * rounds / secs:10.0f} files/s  ({secs:.2f} s, one process per round;"
      f" bytes read per round {read:.0f} of {size:.0f})")
PY

"$venv/bin/python" - "$corpus" "$rounds" <<'PY'
import os, sys, time
from symbolic import debuginfo
corpus, rounds = sys.argv[1], int(sys.argv[2])
paths = [os.path.join(d, f) for d, _, fs in os.walk(corpus) for f in fs]
start = time.perf_counter()
ok = 0
for _ in range(rounds):
    for p in paths:
        try:
            archive = debuginfo.Archive.open(p)
            for obj in archive.iter_objects():
                obj.debug_id, obj.code_id, obj.arch
            ok += 1
        except Exception:
            pass
secs = time.perf_counter() - start
print(f"symbolic    : {len(paths) * rounds / secs:10.0f} files/s  ({secs:.2f} s, in-process;"
      f" {ok // rounds} of {len(paths)} files identified)")
PY

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
