#!/usr/bin/env bash
# `make run`: the main job on the embedded default. Builds symdex, splits the debug info off its
# own release binary, and indexes that pair plus the system libraries it links against into
# ./symbols; then prints the summary, a manifest query, and how to serve the store.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
store=${RUN_STORE:-./symbols}
work=.work/run
cargo build --release --quiet
rm -rf "$work" && mkdir -p "$work/bin" "$work/lib"

# symdex itself, as a CI would ship it: a stripped binary and its separate debug file.
objcopy --only-keep-debug target/release/symdex "$work/bin/symdex.debug"
objcopy --strip-debug --add-gnu-debuglink="$work/bin/symdex.debug" target/release/symdex "$work/bin/symdex"

# The system libraries symdex links against (present on any machine that runs it).
ldd target/release/symdex | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | sort -u |
  while read -r lib; do cp -L "$lib" "$work/lib/"; done

build="local-$(git rev-parse --short HEAD 2>/dev/null || echo dev)"
echo "== symdex index $work --store $store --build $build"
./target/release/symdex index "$work" --store "$store" --build "$build" --product symdex
echo
echo "== symdex manifest query $store --build $build"
./target/release/symdex manifest query "$store" --build "$build"
echo
echo "== symdex verify $store"
./target/release/symdex verify "$store"
echo
echo "== symdex check $work/bin/symdex --store $store --client gdb   (what gdb will ask for)"
./target/release/symdex check "$work/bin/symdex" --store "$store" --client gdb
cat <<TXT

Serve it:   ./target/release/symdex serve $store --addr 127.0.0.1:8080
Then:       DEBUGINFOD_URLS=http://127.0.0.1:8080 gdb $work/bin/symdex
            DEBUGINFOD_URLS=http://127.0.0.1:8080 debuginfod-find debuginfo $(./target/release/symdex keys --json "$work/bin/symdex" | sed -n 's/.*"build_id":"\([0-9a-f]*\)".*/\1/p')
TXT
