#!/usr/bin/env bash
# `make bench` (serve part): `symdex serve` beside nginx serving the same store directory,
# loaded by wrk (keep-alive connections; a small key, a larger one answered from serve's memory
# cache, one over 256 KiB that serve streams from disk, and a DWARF debug file of 20 MB or more,
# bench_compress.sh --large-file). Three rounds, alternating the servers; prints each round's
# req/s and p99 and the median ratio (symdex with --quiet, as nginx runs with access_log off);
# the goal: at least nginx's req/s with p99 no worse.
# Compressed answers: the store is indexed with `--compress zstd,gzip` (copies at
# `_symdex/encoded/<encoding>/<key>`, flat files, docs/compression.md); nginx with `gzip_static on` serves a
# mirror of the store's keys in which `<key>.gz` is a hard link to the key's gzip copy, so both
# answer `Accept-Encoding: gzip` with the same precompressed bytes; symdex's zstd answers' req/s
# are printed beside (nginx has no zstd_static). Installs nginx and wrk (Debian) when missing;
# asserts nothing. Usage: bench_serve.sh STORE_INPUTS_DIR
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
big_input=$(bash "$root/scripts/bench_compress.sh" --large-file)
"$symdex" index --compress zstd,gzip --store "$work/store" "$inputs" $big_input >/dev/null 2>&1 || true
small=$(cd "$work/store" && find unified -name '*.meta' -print -quit)
large=$(cd "$work/store" && find buildid symbols -type f -size +100k -size -256k -print -quit 2>/dev/null || true)
[ -n "$large" ] || large=$(cd "$work/store" && find symbols -type f -print -quit)
big=$(cd "$work/store" && find buildid -type f -name debuginfo -size +19531k -print -quit 2>/dev/null || true)
# A corpus file, not one of the large file's keys (its debuginfod sections are megabytes too).
streamed=$(cd "$work/store" && find buildid symbols -type f -size +300k -size -8M \
  -not -path "${big%/debuginfo}/*" -print -quit 2>/dev/null || true)

# nginx's gzip_static tree: the store's keys (hard links), each gzip copy linked as `<key>.gz`.
mkdir -p "$work/mirror"
for top in "$work/store"/*; do
  case "${top##*/}" in _symdex | _manifest) ;; *) cp -al "$top" "$work/mirror/" ;; esac
done
copies="$work/store/_symdex/encoded/gzip"
if [ -d "$copies" ]; then
  (cd "$copies" && find . -type f -print0) | while IFS= read -r -d '' name; do
    # A copy is one flat file, its key's `/` spelt `\` (an older store's nested path too).
    key=${name//\\//}
    if [ -f "$work/mirror/$key" ]; then ln -f "$copies/$name" "$work/mirror/$key.gz"; fi
  done
fi

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sport=$(port); nport=$(port); gport=$(port)
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
  server { listen 127.0.0.1:$gport; root $work/mirror; gzip_static on; gzip_vary on; }
}
CONF
mkdir -p "$work/tmp"
"$nginx_bin" -c "$work/nginx.conf" -p "$work"
trap 'kill $spid 2>/dev/null; "$nginx_bin" -c "$work/nginx.conf" -p "$work" -s stop 2>/dev/null || true' EXIT
sleep 1

run() { # url [wrk options] -> "req/s p99"
  local out url=$1
  shift
  out=$(wrk -t2 -c32 -d5s --latency "$@" "$url")
  echo "$(echo "$out" | awk '/Requests\/sec/ {print $2}') $(echo "$out" | awk '$1 == "99%" {print $2}')"
}
for key in "$small" "$large" $streamed $big; do
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

# Compressed answers: the keys above that have copies, asked with Accept-Encoding: gzip of
# symdex and of nginx gzip_static (the same bytes), and with zstd of symdex.
answered() { # url encoding -> "Content-Encoding body-bytes"
  curl -s -o /dev/null -H "Accept-Encoding: $2" -w '%header{content-encoding} %{size_download}' "$1"
}
for key in "$large" $streamed $big; do
  [ -f "$copies/$key" ] || continue
  size=$(stat -c %s "$work/store/$key")
  read -r sgz sgzn <<<"$(answered "http://127.0.0.1:$sport/$key" gzip)"
  read -r ngz ngzn <<<"$(answered "http://127.0.0.1:$gport/$key" gzip)"
  read -r szs szsn <<<"$(answered "http://127.0.0.1:$sport/$key" zstd)"
  echo "serve bench, compressed: GET /$key ($size bytes raw; symdex answers gzip with ${sgz:-identity}" \
    "$sgzn bytes, zstd with ${szs:-identity} $szsn bytes; nginx gzip_static gzip with ${ngz:-identity} $ngzn bytes)"
  ratios=()
  for round in 1 2 3; do
    read -r srps sp99 <<<"$(run "http://127.0.0.1:$sport/$key" -H 'Accept-Encoding: gzip')"
    read -r nrps np99 <<<"$(run "http://127.0.0.1:$gport/$key" -H 'Accept-Encoding: gzip')"
    read -r zrps zp99 <<<"$(run "http://127.0.0.1:$sport/$key" -H 'Accept-Encoding: zstd')"
    printf "  round %d: symdex gzip %9s req/s p99 %8s   nginx gzip_static %9s req/s p99 %8s   symdex zstd %9s req/s p99 %8s\n" \
      "$round" "$srps" "$sp99" "$nrps" "$np99" "$zrps" "$zp99"
    ratios+=("$(python3 -c "print(f'{$srps / $nrps:.2f}')")")
  done
  echo "  symdex/nginx gzip_static req/s, median of 3: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 2p)x"
done
