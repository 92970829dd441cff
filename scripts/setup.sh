#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian machine, and nothing when it is all there.
# Idempotent: `make test` calls it every time; `.ci/run` calls it first.
set -euo pipefail

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

# Toolchains the tests build their fixtures with (../shared/spec/FIXTURES.md).
for tool in gcc objcopy readelf; do have "$tool" || need_apt+=(gcc binutils); done
# Split DWARF (tests/split_dwarf.rs): g++ and binutils' `dwp` for GCC's DWARF 4 packages.
have g++ || need_apt+=(g++)
have dwp || need_apt+=(binutils)
for tool in clang-19 ld.lld-19 lld-link-19 ld64.lld-19 wasm-ld-19; do
  have "$tool" || need_apt+=(clang-19 lld-19)
done
for tool in llvm-readobj-19 llvm-pdbutil-19 llvm-objdump-19 llvm-objcopy-19 llvm-dwarfdump-19 dsymutil-19 llvm-lipo-19 llvm-dwp-19; do
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
# LLDB 23's venv (below): python3's venv module (Debian's python3-venv) and the shared
# libpython the wheel's lldb loads (Debian's libpython3.X, found where the wheel looks for it).
if have python3; then
  python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
  libpython=$(python3 -c '
import os, sys, sysconfig
name = sysconfig.get_config_var("INSTSONAME") or ""
dirs = [os.path.join(sys.base_exec_prefix, "lib"), sysconfig.get_config_var("LIBDIR") or ""]
if not any(os.path.isfile(os.path.join(d, name)) for d in dirs):
    print("libpython%d.%d" % sys.version_info[:2])
')
  [ -z "$libpython" ] || need_apt+=("$libpython")
fi
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

# LLDB 23, the debuginfod client that asks for zstd (tests/serve_encoding_clients.rs): PyPI's
# lldb-for-pwndbg (pinned; a 68 MB wheel bundling lldb 23.1 and lldb-server) in a venv of its
# own, .work/lldb23-venv (ignored by git), made anew when it is missing, broken or at another
# version. The tests run its console script .work/lldb23-venv/bin/lldb (tests/common: lldb23()),
# which execs the bundled binary (lldb_for_pwndbg/_vendor/bin/lldb) told where the venv
# Python's shared libpython is; nothing is exported and nothing is put on PATH. pip reads
# PIP_DEFAULT_TIMEOUT (and the rest of its PIP_* settings) from the environment as always.
LLDB23_VERSION=23.1.0.post2
lldb23_venv="$(cd "$(dirname "$0")/.." && pwd)/.work/lldb23-venv"
if ! "$lldb23_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('lldb-for-pwndbg') != '$LLDB23_VERSION')" 2>/dev/null; then
  echo "setup: installing lldb-for-pwndbg==$LLDB23_VERSION (LLDB 23) into .work/lldb23-venv"
  python3 -m venv --clear "$lldb23_venv"
  "$lldb23_venv/bin/python" -m pip install --quiet "lldb-for-pwndbg==$LLDB23_VERSION"
fi
if ! "$lldb23_venv/bin/lldb" --version 2>&1 | grep -q '^lldb version 23\.1\.'; then
  echo "setup: $lldb23_venv/bin/lldb does not run:" >&2
  "$lldb23_venv/bin/lldb" --version >&2 || true
  exit 1
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
