#!/usr/bin/env bash
# `make bench` (push part): `symdex push` beside `aws s3 cp` (awscli from PyPI) sending the same
# files to the same S3 endpoint (moto_server on 127.0.0.1, started here): 1,000 small
# artifacts, then one large one (multipart). Both with the same metadata; push also
# identifies each file and checks the ingest bucket for an earlier copy first. Prints MB/s and
# files/s; asserts nothing. BENCH_PUSH_LARGE_MB sets the large file's size (default 512).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.work/bench-push"
symdex="$root/target/release/symdex"
venv="$root/.work/bench-venv"
large_mb=${BENCH_PUSH_LARGE_MB:-512}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
[ -x "$venv/bin/aws" ] || "$venv/bin/pip" install -q 'awscli==1.36.*'
rm -rf "$work" && mkdir -p "$work/small" "$work/large"
# Distinct artifacts: one small ELF program with a different tail each.
printf 'int main(void) { return 0; }\n' > "$work/p.c"
gcc -s -o "$work/p" "$work/p.c"
python3 - "$work" "$large_mb" <<'PY'
import os, sys
work, large_mb = sys.argv[1], int(sys.argv[2])
program = open(f"{work}/p", "rb").read()
for i in range(1000):
    with open(f"{work}/small/p{i:04}", "wb") as f:
        f.write(program + i.to_bytes(4, "little") * 256)
with open(f"{work}/large/big", "wb") as f:
    f.write(program)
    chunk = os.urandom(1 << 20)
    for _ in range(large_mb):
        f.write(chunk)
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
moto_server -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null || true' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 \
  AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_EC2_METADATA_DISABLED=true
"$venv/bin/aws" s3 mb s3://bench-push >/dev/null

timed() { # label files bytes command...
  local label=$1 files=$2 bytes=$3; shift 3
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  python3 -c "
secs = $end - $start
print(f'  {\"$label\":<44} {secs:7.2f} s  {$bytes / secs / 1e6:8.1f} MB/s  {$files / secs:8.1f} files/s')"
}
small_bytes=$(du -sb "$work/small" | cut -f1)
large_bytes=$(stat -c %s "$work/large/big")
echo "push bench: 1,000 small files ($small_bytes bytes), then one of $large_bytes bytes, to moto_server"
timed "symdex push (8 at once)" 1000 "$small_bytes" \
  "$symdex" push "$work/small" --ingest s3://bench-push/a --build b1 --product p --json
timed "aws s3 cp --recursive (10 at once)" 1000 "$small_bytes" \
  "$venv/bin/aws" s3 cp --recursive --quiet "$work/small" s3://bench-push/b/ --metadata build=b1,product=p
timed "symdex push, the same again (nothing sent)" 1000 "$small_bytes" \
  "$symdex" push "$work/small" --ingest s3://bench-push/a --build b1 --product p --json
timed "symdex push (16 MiB parts, 4 at once)" 1 "$large_bytes" \
  "$symdex" push "$work/large" --ingest s3://bench-push/a --build b1 --product p --json
timed "aws s3 cp (8 MiB parts, 10 at once)" 1 "$large_bytes" \
  "$venv/bin/aws" s3 cp --quiet "$work/large/big" s3://bench-push/b/big --metadata build=b1,product=p
