#!/usr/bin/env bash
# The upstream Go operator's image, for the real-node upgrade test only (tests/e2e/test_upgrade.py; never
# shipped): the static binary hack/build/build-peer.sh builds, alone in one layer, tagged as upstream's manifest
# names its image (mpioperator/mpi-operator:0.8.2, so that manifest is applied unchanged), packed as a
# docker-archive by hack/build/image_archive.py for `ctr images import`. Cached beside the node images, keyed by
# the binary's hash; a second run does no work. Prints the archive's path as the last line of stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${IMAGES_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/images}"
PEER_VERSION="${PEER_VERSION:-v0.8.2}"
TAG="mpioperator/mpi-operator:${PEER_VERSION#v}"

BIN="$(PEER_VERSION="$PEER_VERSION" bash "$HERE/build-peer.sh" | tail -1)"
out="$OUT/peer-operator-${PEER_VERSION}-$(sha256sum "$BIN" | cut -c1-12).tar"
if [[ -f "$out" ]]; then echo "$out"; exit 0; fi

mkdir -p "$OUT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root"
cp "$BIN" "$work/root/mpi-operator"
tar -C "$work/root" --owner=0 --group=0 -cf "$work/layer.tar" mpi-operator
(cd "$HERE/../.." && python3 -m hack.build.image_archive --layer "$work/layer.tar" --out "$out.tmp" --tag "$TAG" \
  --entrypoint /mpi-operator) >/dev/null
rm -f "$OUT/peer-operator-${PEER_VERSION}-"*.tar
mv "$out.tmp" "$out"
printf '[build-peer-image] %s: %s MB\n' "$TAG" "$(du -m "$out" | cut -f1)" >&2
echo "$out"
