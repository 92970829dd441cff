#!/usr/bin/env bash
# `make bench` part: how the local store scales (issue "one stored copy per artifact").
# N distinct ELF files (one gcc build, copies with their build id rewritten to a hash) are indexed into a
# fresh store, indexed again unchanged, verified; elfutils `debuginfod -F` scans the same
# directory in the same run. Prints the curve and the stored / input bytes; asserts nothing.
#   BENCH_SCALE="1000 10000 50000" make bench
set -euo pipefail
export LC_ALL=C # $EPOCHREALTIME with a decimal point
root=$(cd "$(dirname "$0")/.." && pwd)
symdex="${BENCH_SYMDEX:-$root/target/release/symdex}" # another build to compare: BENCH_SYMDEX=path
work="${BENCH_SCALE_DIR:-$root/.work/bench-scale}"
sizes=${BENCH_SCALE:-"1000 5000 20000"}
command -v debuginfod >/dev/null || { echo "bench: debuginfod is missing (make setup installs it)" >&2; exit 1; }
# Trees are removed when the bench is done, never between two timed runs: on an ext4
# without a journal (this machine's disk), each new inode's allocation skips, one buffer
# lookup each, every free inode of its group that was freed in the last minute, or in the
# last six while the block holding it is dirty — as the allocations around it make it
# (`recently_deleted` in ext4's ialloc.c). Measured: a 50,000-file index took 51 s on this
# disk after the smaller sizes' trees had gone, 21 s on a new file system (perf: half of
# the time in that check). A run starting within six minutes of an earlier run's removal
# waits for the rest of them (ext4 only). Kept together, the trees take about 90 KB and 13
# inodes per input file of all sizes (on a small file system, run fewer sizes).
mkdir -p "$work"
removed_at=$(stat -c %Y "$work/removed-at" 2>/dev/null || echo 0)
leftovers=$(find "$work" -mindepth 1 -maxdepth 1 -not -name removed-at | head -1)
[ -n "$leftovers" ] && { find "$work" -mindepth 1 -maxdepth 1 -exec rm -rf {} +; removed_at=$(date +%s); }
wait_s=$((removed_at + 365 - $(date +%s)))
if [ "$wait_s" -gt 0 ] && [ "$(stat -f -c %T "$work")" = "ext2/ext3" ]; then
  echo "bench: waiting ${wait_s} s for the inodes of an earlier run's trees to be reusable" >&2
  sync
  sleep "$wait_s"
fi
trap 'find "$work" -mindepth 1 -maxdepth 1 -exec rm -rf {} +; touch "$work/removed-at"' EXIT
cat > "$work/prog.c" <<'C'
#include <stdio.h>
int compute(int x) { return x * 3 + 1; }
int main(int argc, char **argv) { printf("%d\n", compute(argc)); return 0; }
C
marker=$(printf 'ab%.0s' $(seq 20))
gcc -g -O0 "-Wl,--build-id=0x$marker" -o "$work/template" "$work/prog.c"
now() { echo "$EPOCHREALTIME"; }
# One command run by a python parent: its wall time, its CPU (user + system, all its threads:
# on a disk the wall clock also counts the journal's commits and the machine's other work,
# ±15% run to run here, the CPU a run costs much less) and its peak resident memory
# (`ru_maxrss` of the parent's one child), as "seconds cpu_seconds MiB".
measured() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
wall = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, r.ru_utime + r.ru_stime, r.ru_maxrss // 1024)
PY
}
ticks=$(getconf CLK_TCK)
# A store's file-system objects per input after its fresh index (bookkeeping and manifest
# included, a file of several names counted once, the store's own directory not): each
# distinct inode, then how many names are keys (files outside `_symdex/` and `_manifest/`)
# and how many are directories. Counted once the re-index and verify ran over the
# all-layout store: the same objects (a re-index writes only its manifest record).
objects_of() {
  find "$1" -mindepth 1 -printf '%i %y %P\n' | awk -v n="$n" '
    { if (!seen[$1]++) inodes++; if ($2 == "d") dirs++;
      else if ($3 !~ /^_symdex\// && $3 !~ /^_manifest\//) keys++ }
    END { printf "%.2f/%.2f/%.2f", inodes / n, keys / n, dirs / n }'
}
printf '%8s %10s %10s %10s %10s %12s %8s %8s %10s %10s %12s %10s %10s %10s %10s %10s %10s %10s %16s %16s\n' files index_s reindex_s verify_s debuginfod_s files/s_index publ/in stored/in index/dbgd reidx/idx cpu_ms/file cpu/dbgd index_MB verify_MB manifest_KB +KB/rerun dbgd_lay_s lay/dbgd objs/keys/dirs objs/keys/dirs_dl
for n in $sizes; do
  dir="$work/in-$n" store="$work/store-$n"
  python3 - "$work/template" "$dir" "$n" <<'PY'
import hashlib, os, sys
template, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(template, "rb").read()
marker = b"\xab" * 20
at = data.index(marker)
for i in range(n):
    sub = os.path.join(out, f"{i // 1000:03d}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, f"app{i}"), "wb") as f:
        # Build ids spread like real ones (a hash), not counted up: keys sharing a leading
        # byte share a directory (`gdb/<2 hex>/`), and counting put them all in `00/`.
        f.write(data[:at] + hashlib.sha1(str(i).encode()).digest() + data[at + 20:])
PY
  # Built, then indexed: inputs left alone for 2 s have their status stamped by the first
  # index, so the re-index reads none of them (as in CI, where indexing follows the build).
  # On a disk, the inputs just written (and the files just deleted) are still being written
  # back: flushed first, so neither side is timed against the other's writeback.
  sync
  sleep 2
  read -r index_s index_cpu index_mb < <(measured "$symdex" index --store "$store" "$dir")
  t0=0 t1=$index_s
  # Re-index: the median of three runs (each finds the store as the first left it; one run
  # of a few hundredths of a second is mostly the machine's noise at the small sizes). The
  # store's bytes are counted after the first (one index and one re-index). Each starts with
  # the writes before it flushed: the fresh index's time does not include its write-back,
  # and a re-index of 1,000 files timed during it took 0.05 s instead of 0.01–0.02.
  manifest_bytes() { find "$store/_manifest" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
  manifest_fresh=$(manifest_bytes)
  reindex=()
  for run in 1 2 3; do
    sync
    r0=$(now); "$symdex" index --store "$store" "$dir" >/dev/null; r1=$(now)
    reindex+=("$(python3 -c "print($r1 - $r0)")")
    if [ "$run" = 1 ]; then
      # File bytes, a file with several names (hard links) counted once: what clients are
      # served (publ), and with the bookkeeping (`_symdex/`, `_manifest/` of both runs).
      files_bytes() { find "$@" -type f -printf '%i %s\n' | sort -u | awk '{s += $2} END {print s + 0}'; }
      published=$(files_bytes "$store" -not -path "$store/_symdex/*" -not -path "$store/_manifest/*")
      stored=$(files_bytes "$store")
      input=$(files_bytes "$dir")
    fi
  done
  manifest_rerun=$(( ($(manifest_bytes) - manifest_fresh) / 3 ))
  median=$(printf '%s\n' "${reindex[@]}" | sort -g | sed -n 2p)
  t2=$(python3 -c "print($t1 + $median)")
  read -r verify_s _ verify_mb < <(measured "$symdex" verify "$store")
  t3=$(python3 -c "print($t2 + $verify_s)")
  # The same inputs into a fresh store with the debuginfod layout alone (what `debuginfod -F`
  # itself serves), timed the same way; both stores' file-system objects counted per input.
  dstore="$work/store-$n-debuginfod"
  sync
  e0=$(now); "$symdex" index --store "$dstore" --layout debuginfod "$dir" >/dev/null; e1=$(now)
  objects_all=$(objects_of "$store") objects_dbgd=$(objects_of "$dstore")
  # debuginfod -F: started on the directory, done when it has scanned every file.
  sync
  # A debuginfod that exits before it has scanned them (a random port taken, say) is
  # started again on another port, from a new database, at most three times.
  for attempt in 1 2 3; do
    port=$((20000 + RANDOM % 20000))
    rm -f "$work/db-$n.sqlite"*
    debuginfod -F "$dir" -d "$work/db-$n.sqlite" -p "$port" >/dev/null 2>"$work/debuginfod-$n.log" &
    pid=$!
    d0=$(now)
    exited=""
    while :; do
      scanned=$({ curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null || true; } |
        awk '/^scanned_files_total\{source="file"\}/ {print $2}')
      [ "${scanned:-0}" -ge "$n" ] && break
      kill -0 "$pid" 2>/dev/null || { exited=1; break; }
      sleep 0.05
    done
    [ -z "$exited" ] && break
    echo "bench: debuginfod (port $port) exited before scanning $n files:" >&2
    tail -n 5 "$work/debuginfod-$n.log" >&2
    [ "$attempt" = 3 ] && exit 1
  done
  d1=$(now)
  # Its CPU (user + system, all its threads) until it had scanned them.
  dcpu=$(awk -v t="$ticks" '{print ($14 + $15) / t}' "/proc/$pid/stat")
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  python3 - "$n" "$t0" "$t1" "$t2" "$t3" "$d0" "$d1" "$input" "$published" "$stored" "$index_cpu" "$index_mb" "$dcpu" "$verify_mb" "$manifest_fresh" "$manifest_rerun" "$e0" "$e1" "$objects_all" "$objects_dbgd" <<'PY'
import sys
n = int(sys.argv[1]); t0, t1, t2, t3, d0, d1 = map(float, sys.argv[2:8]); inp, pub, st = map(int, sys.argv[8:11])
cpu, index_mb, dcpu = float(sys.argv[11]), int(sys.argv[12]), float(sys.argv[13]); verify_mb = int(sys.argv[14])
manifest_fresh, manifest_rerun = int(sys.argv[15]), int(sys.argv[16])
e0, e1 = map(float, sys.argv[17:19]); objects_all, objects_dbgd = sys.argv[19:21]
print(f"{n:8d} {t1 - t0:10.2f} {t2 - t1:10.2f} {t3 - t2:10.2f} {d1 - d0:10.2f} {n / (t1 - t0):12.0f} {pub / inp:8.2f} {st / inp:8.2f}"
      f" {(t1 - t0) / (d1 - d0):10.2f} {(t2 - t1) / (t1 - t0):10.2f} {cpu * 1000 / n:12.3f} {cpu / max(dcpu, 1e-9):10.2f} {index_mb:10d} {verify_mb:10d}"
      f" {manifest_fresh / 1000:10.1f} {manifest_rerun / 1000:10.1f} {e1 - e0:10.2f} {(e1 - e0) / (d1 - d0):10.2f}"
      f" {objects_all:>16s} {objects_dbgd:>16s}")
PY
done
echo "(re-index: nothing changed, writes only its manifest; publ/in: the published keys, hard links counted once, the"
echo " debuginfod section objects included; stored/in adds _symdex/ and _manifest/; index --jobs: $(nproc) lanes (the cores);"
echo " cpu_ms/file: the index's CPU (user + system) per file, flat where it scales linearly; cpu/dbgd: its CPU over"
echo " debuginfod's until it had scanned them; index_MB, verify_MB: the fresh index's and verify's peak resident"
echo " memory; manifest_KB: the manifest after the fresh index, +KB/rerun: what each unchanged re-index adds to it"
echo " (one \`repeated\` record);"
echo " dbgd_lay_s: a fresh index with --layout debuginfod alone into its own store, lay/dbgd: its time over debuginfod's;"
echo " objs/keys/dirs: the store's file-system objects (inodes) per input, of which key names (hard links each) and"
echo " directories, every layout; _dl: --layout debuginfod (goal: the keys plus at most two objects);"
echo " goals: index/dbgd <= 1.5, lay/dbgd <= 1, reidx/idx <= 0.05, publ/in <= 1.05; set BENCH_SCALE_DIR=/dev/shm/... to measure off the disk)"
