#!/usr/bin/env bash
# `make hunt`: looks for the races CI's fixed schedules miss. The interleaving and death tests
# run HUNT_SCHEDULES schedules each from a random seed base (printed first: set
# SYMDEX_SEED_BASE and SYMDEX_SCHEDULES to the same to replay a failure), the sole-writer
# death tests die at every change, and the S3 interleavings over moto_server run
# HUNT_S3_SCHEDULES new schedules (0 skips them). About 25 minutes with the defaults here.
# Schedules past CI's have found races its seeds missed, three so far (README).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${SYMDEX_SEED_BASE:-$(( (RANDOM * 32768 + RANDOM) % 1000000 + 10000 ))}
schedules=${HUNT_SCHEDULES:-300}
s3_schedules=${HUNT_S3_SCHEDULES:-8}
echo "hunt: SYMDEX_SEED_BASE=$base SYMDEX_SCHEDULES=$schedules SYMDEX_S3_SCHEDULES=$s3_schedules"
export SYMDEX_SEED_BASE=$base SYMDEX_SCHEDULES=$schedules
cargo test -p symdex-shared --lib --features testing -- interleavings dying
SYMDEX_SOLE_STRIDE=1 cargo test -p symdex-shared --lib --features testing -- sole_writer
if [ "$s3_schedules" -gt 0 ]; then
  SYMDEX_S3_SCHEDULES=$s3_schedules cargo test -p symdex-lambda --test interleavings
fi
echo "hunt: no schedule failed (SYMDEX_SEED_BASE=$base)"
