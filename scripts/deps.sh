#!/bin/sh
# Install the Debian packages Glovebox needs to build, test and benchmark.
# Idempotent: installs only what is missing; safe to run on every build.
set -eu

PKGS="build-essential pkg-config libc6-dev
libevent-dev libjansson-dev libsqlite3-dev libseccomp-dev libssl-dev libcurl4-openssl-dev
libmnl-dev libnftnl-dev libcmocka-dev zlib1g-dev libhttp-parser-dev libldns-dev libarchive-dev
libwslay-dev
musl-tools clang libclang-rt-14-dev clang-format clang-tidy cppcheck
hyperfine bubblewrap tinyproxy util-linux iproute2 nftables procps python3 debootstrap zsh socat
chromium fonts-liberation"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done

# node (>= 18) and npm for the E2B SDK tests (tests/e2b). A Node.js from elsewhere (NodeSource
# ships npm inside its nodejs) is kept as it is; Debian's are installed only when either is absent.
if ! command -v node >/dev/null 2>&1; then
    missing="$missing nodejs npm"
elif ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
elif [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -lt 18 ]; then
    echo "deps: node $(node --version) is older than 18: the E2B SDK tests need 18 or later" >&2
fi

# CRIU >= 4 for hibernate (checkpoint/restore), built from source into .deps/criu (scripts/criu.sh).
# A failed build only leaves hibernate unavailable: warn and go on.
criu_build() {
    "$(dirname "$0")/criu.sh" "${1:-}" ||
        echo "deps: WARNING: CRIU build failed; sandbox hibernate will be unavailable" >&2
}

if [ -z "$missing" ]; then
    [ "${1:-}" = "-q" ] || echo "deps: all packages present"
    criu_build "${1:-}"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages:$missing (run this script as root)" >&2
    exit 1
fi

echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: done"
criu_build "${1:-}"
