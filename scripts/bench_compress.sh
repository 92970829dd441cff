#!/usr/bin/env bash
# `make bench` (compression part): what compressed copies (docs/compression.md) save and cost,
# over the corpus's files and one large DWARF debug file (>= 20 MB):
#   - bytes on the wire: every debug file fetched through `symdex serve` without
#     Accept-Encoding, with `zstd` and with `gzip` (the body's bytes as sent), by format;
#     the goal: <= 0.35x raw for DWARF and PDB debug files;
#   - ingest throughput: `symdex index --compress none` beside `zstd` and `zstd,gzip`, each
#     into a fresh store, rounds alternating the settings (median);
#   - storage: the store's bytes with copies / without (all its files, hard links counted
#     once; and `du -sb`, which adds the directories' sizes: the copies' tree repeats the
#     keys' directories); the goal: <= 1.35x over the corpus with zstd copies.
# Prints figures; asserts nothing. The req/s of compressed answers beside nginx gzip_static is
# in bench_serve.sh; the Lambda's ingest with copies on and off in the indexer part.
# Usage: bench_compress.sh CORPUS_DIR
#        bench_compress.sh --large-file   (prints the large debug file's path, made if missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
symdex="$root/target/release/symdex"

# A DWARF debug file of at least 20 MB (`objcopy --only-keep-debug` of an ELF file with debug
# info), kept in .work/bench-large: BENCH_LARGE_DEBUG if set; else the debug part of the first
# candidate whose part is 20-64 MB (pyenv's libpython builds carry full gcc DWARF; Debian
# dbgsym files); else that of target/release/symdex (line tables only, larger).
large_debug_file() {
  if [ -n "${BENCH_LARGE_DEBUG:-}" ]; then echo "$BENCH_LARGE_DEBUG"; return; fi
  local dir="$root/.work/bench-large" made cand size
  made=$(find "$dir" -name '*.debug' -size +19531k -print -quit 2>/dev/null || true)
  if [ -n "$made" ]; then echo "$made"; return; fi
  mkdir -p "$dir"
  for cand in "$HOME"/.pyenv/versions/*/lib/libpython3*.so.1.0 /usr/lib/debug/.build-id/*/*.debug "$symdex"; do
    [ -f "$cand" ] && readelf -S "$cand" 2>/dev/null | grep -q '\.debug_info' || continue
    objcopy --only-keep-debug "$cand" "$dir/part.tmp" 2>/dev/null || continue
    size=$(stat -c %s "$dir/part.tmp")
    if [ "$size" -ge 20000000 ] && { [ "$size" -le 64000000 ] || [ "$cand" = "$symdex" ]; }; then
      mv "$dir/part.tmp" "$dir/$(basename "$cand").debug"
      echo "$cand" > "$dir/origin.txt"
      echo "$dir/$(basename "$cand").debug"
      return
    fi
  done
  rm -f "$dir/part.tmp"
}
if [ "${1:-}" = "--large-file" ]; then large_debug_file; exit 0; fi

corpus=${1:?usage: bench_compress.sh CORPUS_DIR}
rounds=${BENCH_COMPRESS_ROUNDS:-5}
work="$root/.work/bench-compress"
rm -rf "$work" && mkdir -p "$work"
large=$(large_debug_file)
if [ -z "$large" ]; then echo "compress bench: no large debug file could be made (objcopy?); skipped"; exit 0; fi
origin="$large"
if [ -z "${BENCH_LARGE_DEBUG:-}" ]; then
  origin="objcopy --only-keep-debug of $(cat "$(dirname "$large")/origin.txt")"
fi
echo "compress bench: the corpus ($(find "$corpus" -type f | wc -l) files, $(du -sb "$corpus" | cut -f1) bytes)" \
  "and a large DWARF debug file ($(stat -c %s "$large") bytes, $origin)"

# Bytes on the wire: one store with zstd and gzip copies, served; each debug file's key
# (its unified-layout key, one per distinct content) fetched with each Accept-Encoding.
"$symdex" index --compress zstd,gzip --allow-conflicts --store "$work/wire" "$corpus" "$large" >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$symdex" serve "$work/wire" --quiet --addr "127.0.0.1:$port" >/dev/null 2>"$work/serve.log" &
spid=$!
trap 'kill $spid 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.1
done
"$symdex" keys --json "$corpus" "$large" >"$work/keys.jsonl" 2>/dev/null
python3 - "$port" "$work/wire" "$large" "$work/keys.jsonl" <<'PY'
import http.client, json, os, sys
port, store, large, keys = sys.argv[1:5]
def group(o):
    if os.path.realpath(o["path"]) == os.path.realpath(large):
        return "large DWARF file"
    fmt = o.get("format")
    if fmt in ("elf", "macho") and o.get("has_debug_info"):
        return "DWARF (ELF, Mach-O)"
    return {"pdb": "PDB", "portablepdb": "portable PDB", "breakpad": "Breakpad .sym"}.get(fmt)
def get(key, accept):
    c = http.client.HTTPConnection("127.0.0.1", int(port))
    c.request("GET", "/" + key, headers={"Accept-Encoding": accept} if accept else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, len(body), r.getheader("Content-Encoding") or "identity"
groups, seen = {}, set()
for line in open(keys):
    o = json.loads(line)
    g = group(o)
    unified = [k for k in (o.get("keys") or {}).get("unified", [])
               if k.endswith("/debuginfo") or k.endswith("/breakpad")]
    if not g or not unified:
        continue
    key = "unified/" + unified[0]
    if key in seen or not os.path.isfile(os.path.join(store, key)):
        continue
    seen.add(key)
    sizes = []
    for accept in (None, "zstd", "gzip"):
        status, size, _ = get(key, accept)
        sizes.append(size if status == 200 else 0)
    t = groups.setdefault(g, [0, 0, 0, 0])
    t[0] += 1
    for i in range(3):
        t[i + 1] += sizes[i]
print("bytes on the wire, debug files through `symdex serve` (Accept-Encoding: none / zstd / gzip):")
order = ["DWARF (ELF, Mach-O)", "PDB", "portable PDB", "Breakpad .sym", "large DWARF file"]
def line(name, t):
    n, raw, z, gz = t
    print(f"  {name:<22} {n:3d} files  raw {raw:11,d}  zstd {z:11,d} ({z / raw:.2f}x)"
          f"  gzip {gz:11,d} ({gz / raw:.2f}x)")
for g in order:
    if g in groups:
        line(g, groups[g])
both = [sum(groups.get(g, [0] * 4)[i] for g in ("DWARF (ELF, Mach-O)", "PDB")) for i in range(4)]
if both[1]:
    line("corpus DWARF and PDB", both)
    print(f"  goal <= 0.35x raw for DWARF and PDB debug files: zstd {both[2] / both[1]:.2f}x,"
          f" gzip {both[3] / both[1]:.2f}x")
PY
kill $spid 2>/dev/null || true
wait $spid 2>/dev/null || true
trap - EXIT

# Ingest throughput and storage: fresh stores per setting, rounds alternating the settings;
# wall time and the process's CPU time (user + system: steadier on a busy machine).
echo "ingest with compressed copies, \`symdex index --compress\` into a fresh store, median of $rounds rounds:"
python3 - "$symdex" "$work" "$rounds" "$corpus" "$large" <<'PY'
import os, resource, shutil, statistics, subprocess, sys, time
symdex, work, rounds, corpus, large = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
settings = ["none", "zstd", "zstd,gzip"]
def walk(path):
    if os.path.isfile(path):
        return [path]
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
def file_bytes(store):  # every file once, however many links it has
    seen, total = set(), 0
    for d, _, fs in os.walk(store):
        for f in fs:
            st = os.lstat(os.path.join(d, f))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total
def du(store):  # `du -sb`: files once and directories' sizes
    return int(subprocess.run(["du", "-sb", store], capture_output=True, text=True).stdout.split()[0])
for name, path in (("corpus", corpus), ("large DWARF file", large)):
    files = walk(path)
    size = sum(os.path.getsize(f) for f in files)
    wall = {s: [] for s in settings}
    cpu = {s: [] for s in settings}
    stores = {s: os.path.join(work, f"store-{name.split()[0]}-{s.replace(',', '-')}") for s in settings}
    for _ in range(rounds):
        for setting in settings:
            shutil.rmtree(stores[setting], ignore_errors=True)
            os.sync()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([symdex, "index", "--compress", setting, "--allow-conflicts",
                            "--store", stores[setting], path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall[setting].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[setting].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    w = {s: statistics.median(wall[s]) for s in settings}
    c = {s: statistics.median(cpu[s]) for s in settings}
    fb = {s: file_bytes(stores[s]) for s in settings}
    db = {s: du(stores[s]) for s in settings}
    for s in settings:
        print(f"  {name:<16} --compress {s:<9}: {len(files) / w[s]:7.1f} files/s {size / 1e6 / w[s]:6.1f} MB/s"
              f" ({w[s]:.3f} s, {w[s] / w['none']:.2f}x without); CPU {c[s]:.3f} s"
              f" ({c[s] / c['none']:.2f}x without); store {fb[s]:,d} bytes")
    print(f"  storage ratio with copies, {name} (the store's file bytes with / without, hard links once):"
          f" zstd {fb['zstd'] / fb['none']:.2f}x, zstd+gzip {fb['zstd,gzip'] / fb['none']:.2f}x"
          + (" (goal <= 1.35x with zstd)" if name == "corpus" else "")
          + f"; with its directories (du -sb) {db['zstd'] / db['none']:.2f}x,"
          f" {db['zstd,gzip'] / db['none']:.2f}x")
PY
