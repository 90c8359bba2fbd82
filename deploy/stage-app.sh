#!/bin/sh
# Copies what the container image runs from a built checkout (npm ci && npm run build done) into
# DEST: the manifests, the contracts lock (chaoscore.lock, and its signed note chaoscore.lock.sig
# when the release signed it: the edge checks what it serves against them at start; its history
# chaoscore.lock.history when there is one, to explain older pinned digests), each
# workspace's dist/ (and the standalone's bin/), the image's entrypoint and health check, and
# node_modules pruned to production dependencies. Nothing else: no sources,
# tests, .env or data. Both image builds use it: deploy/Dockerfile's build stage, and
# scripts/ci/image.sh, which stages the tree CI already built (no npm ci inside that build).
# With --no-node-modules it stops before node_modules: scripts/pack.mjs stages the same files
# for the npm package, which lays the workspaces out itself and leaves the rest to npm install.
#   deploy/stage-app.sh [--no-node-modules] SRC DEST
set -eu
with_node_modules=true
if [ "${1-}" = --no-node-modules ]; then
  with_node_modules=false
  shift
fi
[ "$#" -eq 2 ] || {
  echo "usage: deploy/stage-app.sh [--no-node-modules] SRC DEST" >&2
  exit 2
}
src=$1
dest=$2
[ -f "$src/services/standalone/dist/cli.js" ] || {
  echo "stage-app: $src is not built (run npm ci && npm run build there first)" >&2
  exit 1
}
[ ! -e "$dest" ] || [ -z "$(ls -A "$dest")" ] || {
  echo "stage-app: $dest is not empty" >&2
  exit 1
}
mkdir -p "$dest/deploy"

cp "$src/package.json" "$src/package-lock.json" "$src/chaoscore.lock" "$dest/"
for f in chaoscore.lock.sig chaoscore.lock.history; do [ ! -f "$src/$f" ] || cp "$src/$f" "$dest/"; done
[ ! -f "$src/LICENSE" ] || cp "$src/LICENSE" "$dest/"
cp "$src/deploy/entrypoint.sh" "$src/deploy/healthcheck.js" "$dest/deploy/"
for ws in proto services/*; do
  [ -f "$src/$ws/package.json" ] || continue
  mkdir -p "$dest/$ws"
  cp "$src/$ws/package.json" "$dest/$ws/"
  for part in dist bin; do
    [ ! -d "$src/$ws/$part" ] || cp -R "$src/$ws/$part" "$dest/$ws/"
  done
done
# The compiler's incremental state is not something the image runs.
find "$dest" -name '*.tsbuildinfo' -type f -exec rm -f {} +
[ "$with_node_modules" = true ] || exit 0

# Hard links where SRC and DEST share a file system (fast, no second copy), a copy elsewhere.
# The prune below only unlinks files, so SRC's tree is untouched; its hidden lockfile, which npm
# rewrites, is copied rather than linked.
cp -Ral "$src/node_modules" "$dest/" 2>/dev/null || {
  rm -rf "$dest/node_modules"
  cp -Ra "$src/node_modules" "$dest/"
}
rm -f "$dest/node_modules/.package-lock.json"
cp "$src/node_modules/.package-lock.json" "$dest/node_modules/"
# Tool caches kept in node_modules (.vite, .cache) are not dependencies.
find "$dest/node_modules" -mindepth 1 -maxdepth 1 -name '.*' ! -name .bin ! -name .package-lock.json -exec rm -rf {} +
(cd "$dest" && npm prune --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
# The scope folders prune emptied (@eslint, @vitest, ...).
find "$dest/node_modules" -mindepth 1 -maxdepth 1 -type d -empty -delete
# The workspaces resolve through node_modules/@chaos-core/* links into DEST itself.
for link in "$dest"/node_modules/@chaos-core/*; do
  [ -e "$link" ] || {
    echo "stage-app: $link does not resolve inside $dest" >&2
    exit 1
  }
done
