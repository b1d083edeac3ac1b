#!/usr/bin/env bash
# Builds our two images from Dockerfile.webhook and Dockerfile.reconciler without a Docker engine or a
# registry: buildah (Debian package, daemonless, chroot isolation), on the local Python base image made by
# build-images.sh (build argument BASE_IMAGE), written as docker-archives for `ctr images import`.
# Cached under ~/.cache/mpijob-operator/images by the hash of the Dockerfile and the sources it copies.
# Usage: build-operator-images.sh [ARCH]: the Debian architecture to build for (amd64, arm64), by default the host's.
# Another than the host's is built under emulation (hack/build/ensure-binfmt.sh: qemu-user-static): on the base
# image built for ARCH (build-images.sh python:ARCH), `buildah bud --platform linux/ARCH` (the RUN steps, pip
# installing the lock's ARCH wheels, emulated), archived as operator-<component>-ARCH-<key>.tar beside the host's
# operator-<component>-<key>.tar (whose name and key do not change), tagged <component>:$OPERATOR_TAG-ARCH.
# Prints the image directory as the last line of stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${IMAGES_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/images}"
TAG="${OPERATOR_TAG:-dev}"
log() { printf '[build-operator-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

HOST="$(dpkg --print-architecture)"
ARCH="${1:-$HOST}"
case "$ARCH" in amd64|arm64) ;; *) echo "build-operator-images.sh: ARCH=$ARCH is not amd64 or arm64" >&2; exit 2 ;; esac
suffix=""; platform=(); target=python
if [[ "$ARCH" != "$HOST" ]]; then
  suffix="-$ARCH"; platform=(--platform "linux/$ARCH"); target="python:$ARCH"
  bash "$HERE/ensure-binfmt.sh" "$ARCH"
fi

command -v buildah >/dev/null || bash "$HERE/apt-install.sh" buildah
bash "$HERE/build-images.sh" "$target" >/dev/null
BASE_ARCHIVE="$(ls "$OUT"/python-base"$suffix"-????????????.tar | head -1)"
BASE_IMAGE="localhost/mpijob-operator/python-base:3.11-bookworm$suffix"  # where buildah files a docker-archive
mkdir -p "$OUT"
exec 9>"$OUT/.operator.lock"
flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }

mounts=()  # the host's pip settings (index, CA) for the RUN pip install steps, when it has any
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do [[ -f $f ]] && mounts+=(-v "$f:$f:ro"); done

for component in webhook reconciler; do
  key="$( { cat "$ROOT/Dockerfile.$component" "$ROOT/pyproject.toml" "$ROOT/requirements/$component.txt" \
    "$BASE_ARCHIVE.sha" 2>/dev/null; \
    cd "$ROOT" && git ls-files -co --exclude-standard shared "$component" | grep '\.py$' | sort | xargs cat
    [[ -z "$suffix" ]] || echo "$ARCH $(basename "$BASE_ARCHIVE")"; } \
    | sha256sum | cut -c1-12)"
  out="$OUT/operator-$component$suffix-$key.tar"
  [[ -f "$out" ]] && continue
  buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 || buildah pull -q "${platform[@]}" "docker-archive:$BASE_ARCHIVE" >&2
  began=$SECONDS
  log "buildah bud ${platform[*]} -f Dockerfile.$component --build-arg BASE_IMAGE=$BASE_IMAGE"
  buildah bud --quiet --pull=never --isolation chroot --network host --layers=false "${platform[@]}" "${mounts[@]}" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" -f "$ROOT/Dockerfile.$component" -t "mpijob-operator/$component:$TAG$suffix" \
    "$ROOT" >&2
  rm -f "$OUT/operator-$component$suffix-"????????????.tar
  buildah push -q "mpijob-operator/$component:$TAG$suffix" \
    "docker-archive:$out.tmp:docker.io/mpijob-operator/$component:$TAG$suffix" >&2
  mv "$out.tmp" "$out"
  log "mpijob-operator/$component:$TAG$suffix: $(du -m "$out" | cut -f1) MB, built in $((SECONDS - began)) s"
done
echo "$OUT"
