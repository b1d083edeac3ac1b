#!/usr/bin/env bash
# Builds our two images from Dockerfile.webhook and Dockerfile.reconciler without a Docker engine or a
# registry: buildah (Debian package, daemonless, chroot isolation), on the local Python base image made by
# build-images.sh (build argument BASE_IMAGE), written as docker-archives for `ctr images import`.
# Cached under ~/.cache/mpijob-operator/images by the hash of the Dockerfile and the sources it copies.
# Prints the image directory as the last line of stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${IMAGES_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/images}"
TAG="${OPERATOR_TAG:-dev}"
log() { printf '[build-operator-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

command -v buildah >/dev/null || bash "$HERE/apt-install.sh" buildah
bash "$HERE/build-images.sh" python >/dev/null
BASE_ARCHIVE="$(ls "$OUT"/python-base-*.tar | head -1)"
BASE_IMAGE="localhost/mpijob-operator/python-base:3.11-bookworm"  # where buildah files a docker-archive
mkdir -p "$OUT"
exec 9>"$OUT/.operator.lock"
flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }

mounts=()  # the host's pip settings (index, CA) for the RUN pip install steps, when it has any
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do [[ -f $f ]] && mounts+=(-v "$f:$f:ro"); done

for component in webhook reconciler; do
  key="$( { cat "$ROOT/Dockerfile.$component" "$ROOT/pyproject.toml" "$ROOT/requirements/$component.txt" \
    "$BASE_ARCHIVE.sha" 2>/dev/null; \
    cd "$ROOT" && git ls-files -co --exclude-standard shared "$component" | grep '\.py$' | sort | xargs cat; } \
    | sha256sum | cut -c1-12)"
  out="$OUT/operator-$component-$key.tar"
  [[ -f "$out" ]] && continue
  buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 || buildah pull -q "docker-archive:$BASE_ARCHIVE" >&2
  began=$SECONDS
  log "buildah bud -f Dockerfile.$component --build-arg BASE_IMAGE=$BASE_IMAGE"
  buildah bud --quiet --pull=never --isolation chroot --network host --layers=false "${mounts[@]}" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" -f "$ROOT/Dockerfile.$component" -t "mpijob-operator/$component:$TAG" \
    "$ROOT" >&2
  rm -f "$OUT/operator-$component-"*.tar
  buildah push -q "mpijob-operator/$component:$TAG" \
    "docker-archive:$out.tmp:docker.io/mpijob-operator/$component:$TAG" >&2
  mv "$out.tmp" "$out"
  log "mpijob-operator/$component:$TAG: $(du -m "$out" | cut -f1) MB, built in $((SECONDS - began)) s"
done
echo "$OUT"
