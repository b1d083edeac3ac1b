#!/usr/bin/env bash
# Builds the images the real node runs, without a registry or a Docker engine, into a cache directory
# outside the checkout: a root filesystem from Debian packages (mmdebstrap), packed as a docker-archive
# (hack/build/image_archive.py) that `ctr -n k8s.io images import` takes.
#   pause                        the pod sandbox image (registry.k8s.io/pause:3.10), from hack/build/images/pause
#   mpioperator/mpi-pi:openmpi   compatible with upstream's example images (see hack/build/images/README.md)
#   mpioperator/mpi-pi:mpich     MPICH from the PyPI wheel mpich
#   mpioperator/mpi-pi:intel     Intel MPI from the PyPI wheels impi-rt and impi-devel
#   mpijob-operator/python-base  Debian's Python 3.11: the local base of Dockerfile.webhook/.reconciler
# Usage: build-images.sh [pause|openmpi|mpich|intel ...] (default: all). Each archive is keyed by the
# hash of its inputs; a second run with the archives present does no work. Prints the image directory.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/images"
OUT="${IMAGES_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/images}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
IMPI_VERSION="${IMPI_VERSION:-2021.13.1}"  # the version upstream's image has; it bundles libfabric
PAUSE_TAG="registry.k8s.io/pause:3.10"

log() { printf '[build-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
need_mmdebstrap() {  # installed with apt-get when missing and we are root, as build-node.sh installs containerd
  command -v mmdebstrap >/dev/null && return 0
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    log "error: mmdebstrap is missing (apt-get install mmdebstrap; need root and apt-get)"; exit 2
  fi
  log "installing mmdebstrap"
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap ||
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap; }) >&2
}
inputs_hash() {  # the files an image is made of plus the text of its recipe ("$@"), not this whole script
  { cat "$HERE/image_archive.py" "$SRC"/pi.c "$SRC"/entrypoint.sh "$SRC"/sshd_config; printf '%s\n' "$@"; } \
    | sha256sum | cut -c1-12; }
mkdir -p "$OUT"
exec 9>"$OUT/.build.lock"
flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }

pack() {  # pack LAYER OUT TAG [image_archive args...]
  local layer=$1 out=$2 tag=$3; shift 3
  (cd "$HERE/../.." && python3 -m hack.build.image_archive --layer "$layer" --out "$out" --tag "$tag" "$@") >/dev/null
  rm -f "$layer"
  log "$tag: $(du -m "$out" | cut -f1) MB"
}

build_pause() {
  local out="$OUT/pause-$(inputs_hash "$(cat "$SRC/pause/main.go")" "$PAUSE_TAG").tar"
  [[ -f "$out" ]] && return 0
  local work; work="$(mktemp -d)"
  mkdir -p "$work/root"
  (cd "$SRC/pause" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w" -o "$work/root/pause" .)
  tar -C "$work/root" --owner=0 --group=0 -cf "$work/layer.tar" pause
  rm -f "$OUT/pause-"*.tar
  pack "$work/layer.tar" "$out" "$PAUSE_TAG" --entrypoint /pause --user 65535:65535
  rm -rf "$work"
}

# The common part of the pi images, as upstream's build/base/Dockerfile: sshd and ssh on port 2222 with
# host-key checks off, StrictModes no, user mpiuser (uid 1000) with its own sshd config, /entrypoint.sh.
BASE_HOOKS=(
  --customize-hook='mkdir -p "$1/run/sshd" "$1/var/run/sshd"'
  --customize-hook='sed -i "s/[ #]\(.*StrictHostKeyChecking \).*/ \1no/g; s/[ #]\(.*Port \).*/ \12222/g" "$1/etc/ssh/ssh_config"'
  --customize-hook='echo "    UserKnownHostsFile /dev/null" >> "$1/etc/ssh/ssh_config"'
  --customize-hook='sed -i "s/#\(StrictModes \).*/\1no/g; s/#\(Port \).*/\12222/g" "$1/etc/ssh/sshd_config"'
  --customize-hook='chroot "$1" useradd -m -u 1000 -s /bin/bash mpiuser'
  --customize-hook="upload $SRC/sshd_config /home/mpiuser/.sshd_config"
  --customize-hook="upload $SRC/entrypoint.sh /entrypoint.sh"
  --customize-hook="upload $SRC/pi.c /tmp/pi.c"
  --customize-hook='chmod 0755 "$1/entrypoint.sh"'
)
FINAL_HOOKS=(
  --customize-hook='chroot "$1" chown -R mpiuser:mpiuser /home/mpiuser'
  --customize-hook='rm -rf "$1/tmp/pi.c" "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/* "$1/usr/share/doc" "$1/usr/share/man"'
)
BASE_PKGS="openssh-server,openssh-client,ca-certificates,procps,iproute2,dnsutils"

debian_image() {  # debian_image NAME PACKAGES DEV_PACKAGES COMPILE [EXTRA_HOOK...]
  local name=$1 pkgs=$2 dev=$3 compile=$4; shift 4
  local hooks=() envs=()
  while (( $# )); do
    if [[ $1 == --env ]]; then envs+=(--env "$2"); shift 2; else hooks+=("$1"); shift; fi
  done
  local tag="mpioperator/mpi-pi:$name"
  local out="$OUT/mpi-pi-$name-$(inputs_hash "$BASE_PKGS $pkgs $dev $compile $SUITE" "${BASE_HOOKS[@]}" \
    "${FINAL_HOOKS[@]}" "${hooks[@]}" "${envs[@]}").tar"
  [[ -f "$out" ]] && return 0
  [[ -z "${PREPARE:-}" ]] || "$PREPARE"
  need_mmdebstrap
  local work; work="$(mktemp -d)"
  log "$tag: mmdebstrap $SUITE with $pkgs"
  mmdebstrap --quiet --variant=apt --format=tar --include="$BASE_PKGS${pkgs:+,$pkgs},$dev" "${BASE_HOOKS[@]}" "${hooks[@]}" \
    --customize-hook="chroot \"\$1\" sh -c '$compile -O2 -o /home/mpiuser/pi /tmp/pi.c'" \
    --customize-hook="chroot \"\$1\" apt-get purge -y -q --autoremove ${dev//,/ } >/dev/null" \
    "${FINAL_HOOKS[@]}" "$SUITE" "$work/layer.tar" "$MIRROR" >&2
  # mmdebstrap empties /run at the end; root's sshd needs its privilege separation directory there
  mkdir -p "$work/extra/run/sshd"
  tar -C "$work/extra" --owner=0 --group=0 --mode=0755 -rf "$work/layer.tar" ./run/sshd
  rm -f "$OUT/mpi-pi-$name-"*.tar  # earlier recipes' archives
  pack "$work/layer.tar" "$out" "$tag" --entrypoint /entrypoint.sh --workdir /home/mpiuser \
    --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "${envs[@]}"
  rm -rf "$work"
}

build_openmpi() { debian_image openmpi openmpi-bin libopenmpi-dev,gcc,libc6-dev mpicc; }
# MPICH 5.0.2 from the PyPI wheel `mpich`: Debian's MPICH 4.0.2 hung in MPI_Finalize (one rank spinning)
# in 2 of 5 runs of pi across two pods, with any libfabric provider.
MPICH_VERSION="${MPICH_VERSION:-5.0.2}"
MPICH_PREFIX="$OUT/.mpich-$MPICH_VERSION"
mpich_wheel() {
  rm -rf "$MPICH_PREFIX"
  python3 -m pip install --quiet --disable-pip-version-check --no-compile --ignore-installed \
    --no-warn-script-location --prefix "$MPICH_PREFIX" "mpich==$MPICH_VERSION" >&2
  rm -rf "$MPICH_PREFIX/lib/python3"*
}
build_mpich() {
  PREPARE=mpich_wheel debian_image mpich "" gcc,libc6-dev "ldconfig; mpicc" \
    --customize-hook="sync-in $MPICH_PREFIX /usr/local" \
    --customize-hook='printf "/usr/local/lib\n/usr/local/lib/mpich\n" > "$1/etc/ld.so.conf.d/mpich.conf"'
  rm -rf "$MPICH_PREFIX"
}
IMPI_PREFIX="$OUT/.impi-$IMPI_VERSION"  # a fixed path: it is part of the intel recipe's text
impi_wheels() {  # the wheels (impi-rt with its bundled libfabric, impi-devel), installed by pip on the host
  rm -rf "$IMPI_PREFIX"
  python3 -m pip install --quiet --disable-pip-version-check --no-compile --ignore-installed \
    --no-warn-script-location --prefix "$IMPI_PREFIX" "impi-devel==$IMPI_VERSION" "impi-rt==$IMPI_VERSION" >&2
  rm -rf "$IMPI_PREFIX/lib/python3"*
}
build_intel() {  # the prefix is copied to /usr/local: bin/mpirun (Hydra), lib/libmpi.so, include/mpi.h
  PREPARE=impi_wheels debian_image intel "" gcc,libc6-dev "ldconfig; mpicc" \
    --customize-hook="sync-in $IMPI_PREFIX /usr/local" \
    --customize-hook='printf "/usr/local/lib\n/usr/local/lib/libfabric\n" > "$1/etc/ld.so.conf.d/impi.conf"' \
    --env FI_PROVIDER_PATH=/usr/local/lib/libfabric/prov --env I_MPI_ROOT=/usr/local
  rm -rf "$IMPI_PREFIX"
}

# The base of our operator images (Dockerfile.webhook/Dockerfile.reconciler, BASE_IMAGE build argument):
# Debian's Python 3.11 with venv, in place of the public python:3.11-slim that needs a registry.
build_python() {
  local tag="mpijob-operator/python-base:3.11-bookworm"
  local out="$OUT/python-base-$(inputs_hash "python3,python3-venv,python-is-python3,ca-certificates $SUITE").tar"
  [[ -f "$out" ]] && return 0
  need_mmdebstrap
  local work; work="$(mktemp -d)"
  log "$tag: mmdebstrap $SUITE with python3"
  mmdebstrap --quiet --variant=apt --format=tar --include=python3,python3-venv,python-is-python3,ca-certificates \
    --customize-hook='rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/* "$1/usr/share/doc" "$1/usr/share/man"' \
    "$SUITE" "$work/layer.tar" "$MIRROR" >&2
  rm -f "$OUT/python-base-"*.tar
  pack "$work/layer.tar" "$out" "$tag" --cmd python3 --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  rm -rf "$work"
}

targets=("$@"); (( ${#targets[@]} )) || targets=(pause openmpi mpich intel)
for t in "${targets[@]}"; do
  began=$SECONDS
  "build_$t"
  log "$t ready ($((SECONDS - began)) s)"
done
echo "$OUT"
