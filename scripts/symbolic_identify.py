"""Sentry's symbolic identifying every file under a directory, once: the yardstick `make bench`
times beside `symdex keys` (scripts/bench_identify.sh). Prints the files it identified and the
seconds it took after `import` (in-process), one line."""
import os
import sys
import time

start_import = time.perf_counter()
from symbolic import debuginfo  # noqa: E402

corpus = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(corpus) for f in fs)
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
print(f"{ok // rounds} {len(paths)} {secs / rounds:.6f} {start - start_import:.6f}")
