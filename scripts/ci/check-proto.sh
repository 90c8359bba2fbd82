#!/usr/bin/env bash
# Checks the protos: buf lint, generated code in sync with the .proto files, and buf breaking
# against the protos of the previous commit. Packages whose .proto says "DRAFT" (now or in the
# previous commit) are not held to wire compatibility yet: their own issue finishes them.
set -euo pipefail
cd "$(dirname "$0")/../../proto"
export PATH="$PWD/../node_modules/.bin:$PATH"
buf=buf

echo "proto: buf lint"
"$buf" lint

echo "proto: generated code matches the .proto files"
"$buf" generate
if ! git diff --quiet --exit-code -- gen || [ -n "$(git ls-files --others --exclude-standard -- gen)" ]; then
  git --no-pager diff --stat -- gen
  git ls-files --others --exclude-standard -- gen
  echo "proto/gen is out of date: run 'npm run generate' and commit the result" >&2
  exit 1
fi

echo "proto: buf breaking against the previous commit"
if ! prev=$(git rev-parse --verify -q HEAD~1) || ! git cat-file -e "$prev:proto/buf.yaml" 2>/dev/null; then
  echo "  no previous proto version to compare with; skipped"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C .. archive "$prev" proto | tar -x -C "$work" && mv "$work/proto" "$work/before"
mkdir "$work/now" && cp -r buf.yaml chaoscore "$work/now/"
# Draft packages (their .proto says "// DRAFT", now or in the previous commit) are left out on
# both sides: a draft may still change freely, and finishing one is not a breaking change.
for side in now before; do
  for f in $(cd "$work/$side" && grep -rl --include='*.proto' '^// DRAFT' chaoscore || true); do
    rm -rf "$work/now/$(dirname "$f")" "$work/before/$(dirname "$f")"
  done
done
"$buf" breaking "$work/now" --against "$work/before"
echo "  no breaking changes"
