#!/usr/bin/env bash
# `make bench` (upstream part): `symdex serve --upstream` in front of another `symdex serve`
# (the upstream, on 127.0.0.1) whose store holds what the front's store does not.
#   1. Throughput of the front's upstream-cache hits beside the upstream's own store hits for
#      the same key (wrk, 32 keep-alive connections, three rounds of 5 s alternating).
#   2. The latency a miss adds: every key fetched once directly from the upstream, then once
#      through the front with an empty cache (a miss: asked upstream, verified, cached), then
#      again through the front (a cache hit); one new connection per request, the whole body
#      read. Prints median and p90 of each and the median added by a miss.
# Installs wrk (Debian) when missing; asserts nothing. Usage: bench_upstream.sh INPUTS_DIR
set -euo pipefail
inputs=${1:?usage: bench_upstream.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.work/bench-upstream"
symdex="$root/target/release/symdex"
if ! command -v wrk >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
rm -rf "$work" && mkdir -p "$work/own"
"$symdex" index --store "$work/upstream" "$inputs" >/dev/null 2>&1 || true
"$symdex" index --store "$work/own" /dev/null >/dev/null 2>&1 || true
(cd "$work/upstream" && find buildid symbols -type f | sort | head -n 400) > "$work/keys"
small=$(cd "$work/upstream" && find symbols buildid -type f -size -4k -print -quit)
large=$(cd "$work/upstream" && find buildid symbols -type f -size +100k -size -256k -print -quit 2>/dev/null || true)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
uport=$(port); fport=$(port)
"$symdex" serve "$work/upstream" --quiet --addr "127.0.0.1:$uport" >/dev/null 2>"$work/upstream.log" &
upid=$!
"$symdex" serve "$work/own" --quiet --addr "127.0.0.1:$fport" \
  --upstream "http://127.0.0.1:$uport" --upstream-cache "$work/cache" >/dev/null 2>"$work/front.log" &
fpid=$!
trap 'kill $upid $fpid 2>/dev/null || true' EXIT
for p in "$uport" "$fport"; do
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.1; done
done

echo "upstream bench: $(wc -l < "$work/keys") keys the front's store lacks, served by the upstream"
python3 - "$uport" "$fport" "$work/keys" <<'PY'
import http.client, statistics, sys, time
uport, fport, keys = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3]).read().split()

def fetch(port, key):
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/" + key)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return time.perf_counter() - start, response.status, len(body)

def run(label, port):
    times, failed = [], 0
    for key in keys:
        t, status, _ = fetch(port, key)
        times.append(t * 1000)
        failed += status != 200
    times.sort()
    p90 = times[int(len(times) * 0.9) - 1] if len(times) >= 10 else times[-1]
    print(f"  {label:<34} median {statistics.median(times):7.2f} ms  p90 {p90:7.2f} ms"
          f"  ({len(times)} GETs, {failed} not 200)")
    return statistics.median(times)

direct = run("upstream directly (store hits)", uport)
miss = run("through the front, empty cache", fport)
hit = run("through the front, cached", fport)
print(f"  a miss that goes upstream adds {miss - direct:.2f} ms (median); a cache hit "
      f"{hit - direct:+.2f} ms beside the upstream's store hit")
PY

bench() { # url -> "req/s p99"
  local out
  out=$(wrk -t2 -c32 -d5s --latency "$1")
  echo "$(echo "$out" | awk '/Requests\/sec/ {print $2}') $(echo "$out" | awk '$1 == "99%" {print $2}')"
}
for key in "$small" $large; do
  size=$(stat -c %s "$work/upstream/$key")
  echo "upstream bench: GET /$key ($size bytes), 32 keep-alive connections, 3 rounds of 5 s"
  ratios=()
  for round in 1 2 3; do
    read -r crps cp99 <<<"$(bench "http://127.0.0.1:$fport/$key")"
    read -r srps sp99 <<<"$(bench "http://127.0.0.1:$uport/$key")"
    printf "  round %d: upstream-cache hit %10s req/s p99 %8s   store hit %10s req/s p99 %8s\n" \
      "$round" "$crps" "$cp99" "$srps" "$sp99"
    ratios+=("$(python3 -c "print(f'{$crps / $srps:.2f}')")")
  done
  echo "  cache hit/store hit req/s, median of 3: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 2p)x"
done
