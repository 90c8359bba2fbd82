#!/usr/bin/env bash
# The MCP Inspector's command-line mode (@modelcontextprotocol/inspector, pinned below: 0.15.0 is
# the newest that runs on Node 20, the project's Node) for test/e2e/inspector.test.ts. It is
# ~150 MB of web UI, proxy and SDK, so it is no project dependency: it is installed once into its
# own scratch folder, .cache/inspector, and reused while its version matches.
#
#   bash scripts/ci/inspector.sh --prepare   install into .cache/inspector (skipped when there)
#   bash scripts/ci/inspector.sh --check     exit 0 when .cache/inspector holds this version
#   bash scripts/ci/inspector.sh --path      print the Inspector's entry point (after --prepare)
#   bash scripts/ci/inspector.sh ARGS...     run `mcp-inspector ARGS` (prepares first), e.g.
#                                            --cli http://127.0.0.1:3000/mcp --method resources/list
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

INSPECTOR_VERSION=0.15.0
DIR=$ROOT/.cache/inspector
PACKAGE=$DIR/node_modules/@modelcontextprotocol/inspector
ENTRY=$PACKAGE/cli/build/cli.js

die() {
  echo "inspector: $*" >&2
  exit 1
}

ready() {
  [ -f "$ENTRY" ] && [ -f "$PACKAGE/package.json" ] && grep -Fq "\"version\": \"$INSPECTOR_VERSION\"" "$PACKAGE/package.json"
}

prepare() {
  if ready; then
    echo "inspector: @modelcontextprotocol/inspector@$INSPECTOR_VERSION already in .cache/inspector"
    return
  fi
  echo "inspector: installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into .cache/inspector"
  mkdir -p "$ROOT/.cache"
  local tmp
  tmp=$(mktemp -d "$ROOT/.cache/inspector.XXXXXX")
  # Its own package.json, so nothing reaches the project's dependencies or lockfile.
  printf '{\n  "name": "chaos-core-inspector-scratch",\n  "private": true,\n  "description": "Written by scripts/ci/inspector.sh"\n}\n' >"$tmp/package.json"
  npm install --prefix "$tmp" --save-exact --ignore-scripts --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" ||
    { rm -rf "$tmp"; die "npm install @modelcontextprotocol/inspector@$INSPECTOR_VERSION failed"; }
  rm -rf "$DIR"
  mv "$tmp" "$DIR"
  ready || die "the Inspector in .cache/inspector is not version $INSPECTOR_VERSION"
  echo "inspector: @modelcontextprotocol/inspector@$INSPECTOR_VERSION installed into .cache/inspector"
}

case "${1:-}" in
  --prepare) prepare ;;
  --check) ready ;;
  --path) ready || die "not prepared: run 'bash scripts/ci/inspector.sh --prepare'"; echo "$ENTRY" ;;
  *) prepare >/dev/null; exec node "$ENTRY" "$@" ;;
esac
