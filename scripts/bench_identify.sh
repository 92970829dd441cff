#!/usr/bin/env bash
# `make bench`, identification: `symdex keys --json` over a corpus ten times the shared one
# (its files copied ten times under .work/), beside Sentry's symbolic (PyPI) identifying the
# same files: symbolic in-process (timed after its import, over the files alone) and both
# whole-process (a process started, run over every file and reaped: what a CI step pays);
# also `keys --details` (the sources each file names read too) and the floor (a C walk that
# only opens each file and reads its head). Rounds alternate the two tools; each figure is a median, the ratio the median of each
# round's pair. Prints figures; asserts nothing.
#   bench_identify.sh CORPUS_DIR VENV_PYTHON
set -euo pipefail
corpus=$1
python=$2
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ID_ROUNDS:-11}
copies=${BENCH_ID_COPIES:-10}
big="$root/.work/bench-corpus-x$copies"
want=$(( $(find "$corpus" -type f | wc -l) * copies ))
if [ "$(find "$big" -type f 2>/dev/null | wc -l)" != "$want" ]; then
  rm -rf "$big"
  mkdir -p "$big"
  for i in $(seq "$copies"); do cp -r "$corpus" "$big/copy$i"; done
fi
# The floor under any identifier here: a C program walking the same tree, opening each file,
# reading its first 16 KiB (symdex's head) and closing it, on one thread, parsing nothing.
floor="$root/.work/bench-floor"
cat > "$floor.c" <<'C'
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <unistd.h>
static char head[16384];
static long files;
static int each(const char *path, const struct stat *st, int type, struct FTW *at) {
  (void)st; (void)at;
  if (type != FTW_F) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  if (pread(fd, head, sizeof head, 0) >= 0) files++;
  close(fd);
  return 0;
}
int main(int argc, char **argv) {
  (void)argc;
  nftw(argv[1], each, 64, FTW_PHYS);
  printf("%ld\n", files);
  return 0;
}
C
gcc -O2 -o "$floor" "$floor.c"
"$python" - "$root/target/release/symdex" "$big" "$rounds" "$python" "$root/scripts/symbolic_identify.py" "$floor" <<'PY'
import json, os, statistics, subprocess, sys, time
symdex, corpus, rounds, python, script, floor = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
paths = [os.path.join(d, f) for d, _, fs in os.walk(corpus) for f in fs]
files, size = len(paths), sum(os.path.getsize(p) for p in paths)
rows = subprocess.run([symdex, "keys", "--json", corpus], capture_output=True, check=False).stdout
parsed = [json.loads(l) for l in rows.splitlines()]
read = sum(r.get("bytes_read", 0) for r in parsed)
ok = sum(1 for r in parsed if "format" in r)

def whole(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False).stdout
    return time.perf_counter() - start, out

sx, sy, sd, fl, inproc, ratios = [], [], [], [], [], []
for _ in range(rounds):
    t_symdex, _ = whole([symdex, "keys", "--json", corpus])
    t_symbolic, out = whole([python, script, corpus])
    sd.append(whole([symdex, "keys", "--json", "--details", corpus])[0])
    fl.append(whole([floor, corpus])[0])
    sx.append(t_symdex)
    sy.append(t_symbolic)
    inproc.append(float(out.split()[2]))
    ratios.append(t_symbolic / t_symdex)
known = int(out.split()[0])
mb = size / 1e6
def line(what, secs):
    print(f"{what:<42} {files / secs:9.0f} files/s {mb / secs:9.1f} MB/s  ({secs * 1000:.1f} ms)")
print(f"identification: {files} files, {mb:.1f} MB (the corpus x{len(os.listdir(corpus))}), "
      f"median of {rounds} alternating rounds")
line("symdex keys --json (whole process)", statistics.median(sx))
line("symdex keys --json --details (sources too)", statistics.median(sd))
line("floor: walk, open, read 16 KiB, close (C)", statistics.median(fl))
line("symbolic (in-process, after its import)", statistics.median(inproc))
line("symbolic (whole process, python one-shot)", statistics.median(sy))
print(f"{'symdex / symbolic whole-process':<42} {statistics.median(ratios):9.1f}x (paired rounds,"
      f" {min(ratios):.1f}x-{max(ratios):.1f}x)")
print(f"{'symdex / symbolic in-process':<42} {statistics.median(inproc) / statistics.median(sx):9.1f}x")
print(f"{'symbolic whole-process / the floor':<42} {statistics.median(sy) / statistics.median(fl):9.1f}x"
      f" (what a one-core reader of each file's head, parsing nothing, would be)")
print(f"symdex identified {ok} rows of {files} files (symbolic {known}), its parsers asking for "
      f"{read / files:.0f} bytes a file")
PY
