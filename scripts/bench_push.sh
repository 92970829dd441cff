#!/usr/bin/env bash
# `make bench` (push part): `symdex push` beside `aws s3 cp` sending the same files with the
# same metadata to the same kind of S3 endpoint (moto_server on 127.0.0.1, started here): one
# large file (multipart), then 500 small artifacts (`aws s3 cp --recursive`). Each run gets a
# fresh moto_server (it keeps every object it is sent), the two tools take turns first; prints
# each round's seconds and the median ratio aws/symdex (above 1: push is faster). Push also
# identifies every file, lists the build's prefix and sends each file's SHA-256. Asserts nothing.
# BENCH_PUSH_LARGE_MB: the large file's size in MiB (default 500, about 525 MB);
# BENCH_PUSH_ROUNDS: rounds (default 3); BENCH_PUSH_SYMDEX: another symdex binary (an earlier
# build, to compare). Skipped, saying so, without `aws` or moto_server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.work/bench-push"
symdex=${BENCH_PUSH_SYMDEX:-$root/target/release/symdex}
large_mb=${BENCH_PUSH_LARGE_MB:-500}
rounds=${BENCH_PUSH_ROUNDS:-3}
aws=$(command -v aws || true)
[ -n "$aws" ] || [ ! -x "$root/.work/bench-venv/bin/aws" ] || aws="$root/.work/bench-venv/bin/aws"
if [ -z "$aws" ]; then
  echo "push bench: skipped (no aws CLI on PATH: pip install awscli to compare push with aws s3 cp)"
  exit 0
fi
if ! command -v moto_server >/dev/null 2>&1; then
  echo "push bench: skipped (no moto_server: scripts/setup.sh installs it)"
  exit 0
fi
rm -rf "$work" && mkdir -p "$work/small" "$work/large"
# Distinct artifacts: one small ELF program with a different tail each; the large file is that
# program followed by random bytes.
printf 'int main(void) { return 0; }\n' > "$work/p.c"
gcc -s -o "$work/p" "$work/p.c"
python3 - "$work" "$large_mb" <<'PY'
import os, sys
work, large_mb = sys.argv[1], int(sys.argv[2])
program = open(f"{work}/p", "rb").read()
for i in range(500):
    with open(f"{work}/small/p{i:04}", "wb") as f:
        f.write(program + i.to_bytes(4, "little") * 256)
with open(f"{work}/large/big", "wb") as f:
    f.write(program)
    for _ in range(large_mb):
        f.write(os.urandom(1 << 20))
PY

moto=
stop_moto() { [ -z "$moto" ] || { kill "$moto" 2>/dev/null || true; wait "$moto" 2>/dev/null || true; }; moto=; }
trap stop_moto EXIT
start_moto() {
  stop_moto
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  moto_server -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  moto=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
  "$aws" s3 mb s3://bench-push >/dev/null
}
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 \
  AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
# Seconds one command takes against a fresh moto_server, in $secs.
secs=
timed() {
  start_moto
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  secs=$(python3 -c "print(f'{$end - $start:.2f}')")
}
push() { "$symdex" push "$1" --ingest s3://bench-push/a --build b1 --product p --json; }
cp_aws() { # what: large or small
  if [ "$1" = large ]; then
    "$aws" s3 cp --quiet "$work/large/big" s3://bench-push/b/big --metadata build=b1,product=p
  else
    "$aws" s3 cp --quiet --recursive "$work/small" s3://bench-push/b/ --metadata build=b1,product=p
  fi
}
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

"$aws" --version 2>&1 | head -1 | sed 's/^/push bench: /'
for what in large small; do
  if [ "$what" = large ]; then
    echo "push bench: one file of $(stat -c %s "$work/large/big") bytes (16 MiB parts; aws s3 cp: 8 MiB, 10 at once), $rounds rounds"
  else
    echo "push bench: 500 small files ($(du -sb "$work/small" | cut -f1) bytes; aws s3 cp --recursive), $rounds rounds"
  fi
  ours=() theirs=() ratios=()
  for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
      timed push "$work/$what"; s=$secs
      timed cp_aws "$what"; a=$secs
    else
      timed cp_aws "$what"; a=$secs
      timed push "$work/$what"; s=$secs
    fi
    ours+=("$s") theirs+=("$a") ratios+=("$(python3 -c "print(f'{$a / $s:.2f}')")")
    printf "  round %d: symdex push %6.2f s   aws s3 cp %6.2f s   %sx\n" "$round" "$s" "$a" "${ratios[-1]}"
  done
  echo "  median: symdex push $(median "${ours[@]}") s, aws s3 cp $(median "${theirs[@]}") s; aws/symdex $(median "${ratios[@]}")x (above 1: push is faster)"
done
# A re-run: everything is in the ingest bucket already, nothing is sent.
start_moto
push "$work/small" >/dev/null
start=$(date +%s.%N)
push "$work/small" >/dev/null
end=$(date +%s.%N)
python3 -c "print(f'  symdex push of the 500 small files again (nothing sent): {$end - $start:.2f} s')"
