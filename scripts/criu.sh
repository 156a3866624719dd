#!/bin/sh
# Build CRIU 4.1.1 from Debian trixie's source package into .deps/criu/ (binary: .deps/criu/bin/criu).
# Debian 12's criu 3.17 fails on this kernel's vDSO (docs/hibernate.md, host-facts §6); the trixie .deb needs a
# newer glibc, so the trixie *source* is built against bookworm's libraries. The system's apt sources are not
# touched: a private sources.list, list dir and cache under .deps/criu/apt/ are used for `apt-get source` only.
# scripts/criu-patches/*.patch are applied on top (0001: restore the exe link of a process
# exec'd from a memfd, as glovebox-init is). Idempotent: a fast no-op when .deps/criu/bin/criu
# exists, `criu --version` works and it was built with the current patches.
# Usage: scripts/criu.sh [-q]
set -eu

VERSION=4.1.1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/.deps/criu
BIN=$DEST/bin/criu
QUIET=${1:-}

say() { [ "$QUIET" = "-q" ] || echo "criu.sh: $*"; }
fail() {
    echo "criu.sh: FAILED: $*" >&2
    echo "criu.sh: hibernate (checkpoint/restore) will be unavailable; set GLOVEBOX_CRIU to a CRIU >= 4 binary instead" >&2
    exit 1
}

PATCHES=$(cat "$ROOT"/scripts/criu-patches/*.patch | cksum | cut -d' ' -f1)
if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "Version: $VERSION" &&
    [ "$(cat "$BIN.patches" 2>/dev/null)" = "$PATCHES" ]; then
    say "CRIU $VERSION present at $BIN"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "building CRIU needs root (apt-get install of the build dependencies)"

BUILD_DEPS="libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev protobuf-compiler libnl-3-dev libnet1-dev
libgnutls28-dev libnftables-dev libbsd-dev pkg-config python3-protobuf uuid-dev libaio-dev libdrm-dev
libcap-dev build-essential dpkg-dev xz-utils patch"

missing=""
for p in $BUILD_DEPS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    say "installing build dependencies:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || fail "apt-get update"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null || fail "apt-get install$missing"
fi

APT=$DEST/apt
SRC=$DEST/src
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$SRC" "$DEST/bin"
printf 'deb-src http://deb.debian.org/debian trixie main\n' >"$APT/sources.list"
set -- -o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache"

TARBALL=$SRC/criu_$VERSION.orig.tar.xz
if [ ! -s "$TARBALL" ]; then
    say "fetching the trixie source package (private apt lists in $APT)"
    apt-get "$@" -qq update || fail "apt-get update of the private trixie deb-src list"
    # Only the orig tarball is needed; a missing debian.tar.xz or an unverifiable .dsc is harmless.
    (cd "$SRC" && apt-get "$@" -qq --download-only source "criu=$VERSION*" >/dev/null 2>&1) ||
        (cd "$SRC" && apt-get "$@" -qq --download-only source criu >/dev/null 2>&1) || true
    [ -s "$TARBALL" ] || fail "criu_$VERSION.orig.tar.xz was not downloaded (is trixie still on $VERSION? see $SRC)"
fi

say "building CRIU $VERSION (a few minutes)"
rm -rf "$SRC/criu-$VERSION"
tar -C "$SRC" -xf "$TARBALL" || fail "unpacking $TARBALL"
for p in "$ROOT"/scripts/criu-patches/*.patch; do
    patch -s -d "$SRC/criu-$VERSION" -p1 <"$p" || fail "applying $p"
done
LOG=$SRC/build.log
if ! make -C "$SRC/criu-$VERSION" -j2 criu >"$LOG" 2>&1; then
    tail -n 30 "$LOG" >&2
    fail "make criu (full log: $LOG)"
fi
install -m 0755 "$SRC/criu-$VERSION/criu/criu" "$BIN.tmp" || fail "install"
mv -f "$BIN.tmp" "$BIN"
"$BIN" --version >/dev/null 2>&1 || fail "$BIN --version does not run"
echo "$PATCHES" >"$BIN.patches"
say "CRIU $VERSION installed at $BIN"
