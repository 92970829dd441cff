#!/usr/bin/env bash
# `make bench` (serve part): `symdex serve` beside nginx serving the same store directory,
# loaded by wrk (keep-alive connections; a small key, a larger one answered from serve's memory
# cache, and one over 256 KiB that serve streams from disk). Three rounds, alternating the two
# servers; prints each round's req/s and p99 and the median ratio (symdex with --quiet, as
# nginx runs with access_log off); the goal: at least nginx's req/s with p99 no worse. Installs nginx and wrk (Debian) when
# missing; asserts nothing. Usage: bench_serve.sh STORE_INPUTS_DIR
set -euo pipefail
inputs=${1:?usage: bench_serve.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.work/bench-serve"
symdex="$root/target/release/symdex"
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
if [ ${#need[@]} -gt 0 ]; then
  echo "bench: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
rm -rf "$work" && mkdir -p "$work"
"$symdex" index --store "$work/store" "$inputs" >/dev/null 2>&1 || true
small=$(cd "$work/store" && find unified -name '*.meta' -print -quit)
large=$(cd "$work/store" && find buildid symbols -type f -size +100k -size -256k -print -quit 2>/dev/null || true)
[ -n "$large" ] || large=$(cd "$work/store" && find symbols -type f -print -quit)
streamed=$(cd "$work/store" && find buildid symbols -type f -size +300k -print -quit 2>/dev/null || true)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sport=$(port); nport=$(port)
"$symdex" serve "$work/store" --quiet --addr "127.0.0.1:$sport" >/dev/null 2>"$work/serve.log" &
spid=$!
cat > "$work/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nodelay on;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  server { listen 127.0.0.1:$nport; root $work/store; location ~ ^/_(symdex|manifest)/ { return 404; } }
}
CONF
mkdir -p "$work/tmp"
"$nginx_bin" -c "$work/nginx.conf" -p "$work"
trap 'kill $spid 2>/dev/null; "$nginx_bin" -c "$work/nginx.conf" -p "$work" -s stop 2>/dev/null || true' EXIT
sleep 1

run() { # url -> "req/s p99"
  local out
  out=$(wrk -t2 -c32 -d5s --latency "$1")
  echo "$(echo "$out" | awk '/Requests\/sec/ {print $2}') $(echo "$out" | awk '$1 == "99%" {print $2}')"
}
for key in "$small" "$large" $streamed; do
  size=$(stat -c %s "$work/store/$key")
  echo "serve bench: GET /$key ($size bytes), 32 keep-alive connections, 3 rounds of 5 s"
  ratios=()
  for round in 1 2 3; do
    read -r srps sp99 <<<"$(run "http://127.0.0.1:$sport/$key")"
    read -r nrps np99 <<<"$(run "http://127.0.0.1:$nport/$key")"
    printf "  round %d: symdex %10s req/s p99 %8s   nginx %10s req/s p99 %8s\n" \
      "$round" "$srps" "$sp99" "$nrps" "$np99"
    ratios+=("$(python3 -c "print(f'{$srps / $nrps:.2f}')")")
  done
  echo "  symdex/nginx req/s, median of 3: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 2p)x"
done
