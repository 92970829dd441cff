#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian machine, and nothing when it is all there.
# Idempotent: `make test` calls it every time; `.ci/run` calls it first.
set -euo pipefail

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

# Toolchains the tests build their fixtures with (../shared/spec/FIXTURES.md).
for tool in gcc objcopy readelf; do have "$tool" || need_apt+=(gcc binutils); done
for tool in clang-19 ld.lld-19 lld-link-19 ld64.lld-19 wasm-ld-19; do
  have "$tool" || need_apt+=(clang-19 lld-19)
done
for tool in llvm-readobj-19 llvm-pdbutil-19 llvm-objdump-19 llvm-objcopy-19 llvm-dwarfdump-19 dsymutil-19 llvm-lipo-19; do
  have "$tool" || need_apt+=(llvm-19)
done
have zip || need_apt+=(zip)
# The archive shapes CI uploads, made with the real tools (tests/archives.rs): symstore's
# /compress CAB files with gcab, tarballs in every compression, Debian packages with dpkg-deb
# (Essential on Debian; named for other bases), RPM packages with rpmbuild, 7z archives with
# 7-Zip's 7zz, lzip's tarballs and files with lzip.
have gcab || need_apt+=(gcab)
have lzip || need_apt+=(lzip)
have dpkg-deb || need_apt+=(dpkg)
have rpmbuild || need_apt+=(rpm)
have 7zz || need_apt+=(7zip)
for tool in zstd xz bzip2 gzip tar; do
  have "$tool" || need_apt+=(zstd xz-utils bzip2 gzip tar)
done
# The edge functions' tests (`make edge-test`: node --test) and `sha256sum` in the auth test.
have node || need_apt+=(nodejs)
have sha256sum || need_apt+=(coreutils)
# Real symbol clients the end-to-end tests drive.
have debuginfod-find || need_apt+=(debuginfod elfutils)
have gdb || need_apt+=(gdb)
have lldb-19 || need_apt+=(lldb-19)
# The audit page's browser test (tests/audit_page.rs): Debian's Chromium, driven by npm
# playwright-core (which downloads no browser of its own here).
have chromium || need_apt+=(chromium)
have npm || need_apt+=(npm)

if [ ${#need_apt[@]} -gt 0 ]; then
  mapfile -t pkgs < <(printf '%s\n' "${need_apt[@]}" | sort -u)
  echo "setup: installing Debian packages: ${pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# moto_server: the real S3 + SQS endpoint the Lambda tests start on 127.0.0.1 (pinned).
MOTO_VERSION=5.2.5
if ! python3 -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null || ! have moto_server; then
  echo "setup: installing moto[server]==$MOTO_VERSION"
  python3 -m pip install --quiet "moto[server]==$MOTO_VERSION"
fi

# sentry-cli (PyPI, pinned): the tests make real Sentry source bundles with it.
SENTRY_CLI_VERSION=2.58.2
if ! sentry-cli --version 2>/dev/null | grep -qx "sentry-cli $SENTRY_CLI_VERSION"; then
  echo "setup: installing sentry-cli==$SENTRY_CLI_VERSION"
  python3 -m pip install --quiet "sentry-cli==$SENTRY_CLI_VERSION"
fi

# playwright-core, at the version tests/browser/package-lock.json pins.
browser_dir="$(cd "$(dirname "$0")/../tests/browser" && pwd)"
pinned=$(node -p "require('$browser_dir/package-lock.json').packages['node_modules/playwright-core'].version")
installed=$(node -p "try { require('$browser_dir/node_modules/playwright-core/package.json').version } catch { '' }")
if [ "$installed" != "$pinned" ]; then
  echo "setup: installing playwright-core $pinned (npm ci in tests/browser)"
  (cd "$browser_dir" && npm ci --no-audit --no-fund --silent)
fi

if ! have cargo; then
  echo "setup: cargo is missing; install Rust (rustup) first" >&2
  exit 1
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt || true
echo "setup: ok"
